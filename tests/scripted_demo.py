"""The voice demo with a scripted recogniser: real speech for the endpointer, chosen words for
each utterance. What the demo then does with time, grammars and actions needs no trained
model (tests/test_demo.py and the bad-input cases of tests/robustness/assistant.py use it).
"""

import io
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

from asr.assistant.actions import ActionsConfig, Assistant
from asr.assistant.demo import Console, VoiceDemo, file_blocks, pcm_blocks
from asr.assistant.intents import IntentParser
from asr.grammar import Grammar
from asr.vad import VADConfig
from helpers import COMMANDS

RATE = 16000
DEFAULT_GRAMMAR = Path(__file__).resolve().parents[1] / "recipes/voice_commands/commands.yaml"


class ScriptedTranscriber:
    """Says the script's next text for each utterance it is given, as a recogniser that is
    sure of it (no scores: the intent parser then reads the text alone)."""

    sample_rate = RATE
    device = "cpu"

    def __init__(self, script: list[str]) -> None:
        self.script = list(script)

    def transcribe_scored(self, waves: list[torch.Tensor], align: bool = False) -> list:
        return [(self.script.pop(0) if self.script else "", None) for _ in waves]


def speech() -> np.ndarray:
    """One second of a real person saying "yes" (Speech Commands), at RATE."""
    data, rate = sf.read(sorted((COMMANDS / "yes").glob("*.wav"))[0], dtype="float32")
    assert rate == RATE
    return data


def stream(gaps: list[float]) -> np.ndarray:
    """An utterance after each gap of silence (seconds), and a second of silence at the end."""
    clip, parts = speech(), []
    for gap in gaps:
        parts += [np.zeros(int(gap * RATE), np.float32), clip]
    return np.concatenate([*parts, np.zeros(RATE, np.float32)])


def run_demo(script: list[str], gaps: list[float], folder: Path, grammar: Grammar | None = None,
             stdin: bool = False, **actions) -> tuple[list[str], Assistant]:
    """The lines the demo prints for `stream(gaps)` heard as `script`, from a file (or raw PCM
    on stdin), faster than real time, and its assistant; `actions`: ActionsConfig's settings
    (home: `folder`)."""
    lines: list[str] = []
    console = Console(lines.append)
    assistant = Assistant(ActionsConfig(**{"home": str(folder), **actions}),
                          announce=lambda line: console(f"** {line}"))
    parser = IntentParser(grammar or Grammar.load(DEFAULT_GRAMMAR))
    demo = VoiceDemo(ScriptedTranscriber(script), parser, assistant, VADConfig(), RATE, console)
    wave = stream(gaps)
    block = RATE * 30 // 1000
    if stdin:
        pcm = (np.clip(wave, -1, 1) * 32767).astype("<i2").tobytes()
        blocks = pcm_blocks(io.BytesIO(pcm), block)
    else:
        sf.write(folder / "stream.wav", wave, RATE, subtype="PCM_16")
        blocks = file_blocks(folder / "stream.wav", RATE, block)
    demo.run(blocks)
    return lines, assistant


def actions_of(lines: list[str]) -> list[str]:
    """The results printed ("  action: ..."), in order."""
    return [line.removeprefix("  action: ") for line in lines if line.startswith("  action: ")]
