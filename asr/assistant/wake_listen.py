"""The demo's sleep: nothing is acted on until the wake phrase is heard (asr/wake.py), then one
command is, then it sleeps again, as Rhino's follow-on to Porcupine does.

    asr-demo wake=computer grammar=coffee.yaml
    asr-demo wake=computer wake_timeout_s=4 wake_chime=true --input kitchen.wav

The detector hears every block, awake or asleep, so its window stays one continuous stream.
On waking, the audio already heard after the phrase's end goes to the command's endpointer
first: "computer, make me a latte" in one breath is one command, and so is a pause after the
name. When no speech starts within `wake_timeout_s`, it sleeps again.
"""

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from asr.untrusted import check_fields, check_ranges
from asr.vad import SpeechSpan
from asr.wake import DEFAULT_SENSITIVITY, Detection, WakeWordDetector


@dataclass
class WakeSettings:
    """The demo's wake phrase settings (conf/demo.yaml's wake, wake_sensitivity, ...)."""

    phrases: list[str]
    sensitivity: float = DEFAULT_SENSITIVITY
    timeout_s: float = 5.0  # awake this long at most without speech starting
    chime: bool = False  # ring the terminal's bell on waking, besides the printed cue

    def __post_init__(self) -> None:
        check_fields(self, "wake")
        check_ranges(self, "wake", sensitivity=(0, 1), timeout_s=(0.1, 600))
        if not self.phrases:
            raise ValueError("wake: no wake phrase given")


class WakeListener:
    """Asleep: passes nothing on. Awake: passes on the audio after the phrase, until the
    command is handled (`sleep`) or `timeout_s` passes without speech."""

    def __init__(self, detector: WakeWordDetector, settings: WakeSettings,
                 announce: Callable[[str], None]) -> None:
        self.detector, self.settings, self.announce = detector, settings, announce
        self.awake_since: float | None = None  # stream time of the phrase's end, when awake

    @property
    def awake(self) -> bool:
        return self.awake_since is not None

    def hear(self, samples: np.ndarray, in_speech: bool) -> np.ndarray | None:
        """One block in; what the command's endpointer is to hear of it (None: nothing)."""
        started = time.monotonic()
        found = self.detector.accept(samples)
        if not self.awake:
            if not found:
                return None
            return self._wake(found[-1], time.monotonic() - started)
        if not in_speech and self.detector.seconds - self.awake_since > self.settings.timeout_s:
            self.announce(f"no command within {self.settings.timeout_s:g} s: sleeping")
            self.sleep()
            return None
        return samples

    def _wake(self, found: Detection, computing: float) -> np.ndarray:
        self.awake_since = found.time + self.detector.config.tail_s
        delay = self.detector.seconds - found.time + computing
        if self.settings.chime:
            print("\a", end="", file=sys.stderr, flush=True)
        self.announce(f"awake: heard \"{found.phrase}\" at {found.time:.2f} s (score "
                      f"{found.score:.2f}); listening for a command ({delay:.2f} s after the "
                      "phrase)")
        return self.detector.after(found)

    def sleep(self) -> None:
        self.awake_since = None

    def shifted(self, utterance: SpeechSpan) -> SpeechSpan:
        """An utterance of the command's endpointer (timed from waking) in stream time."""
        origin = self.awake_since or 0.0
        return replace(utterance, start=round(utterance.start + origin, 3),
                       end=round(utterance.end + origin, 3))
