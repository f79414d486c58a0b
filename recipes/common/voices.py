"""The synthetic voices of the voice-command corpus, and which split hears which.

Voices come from espeak-ng (accents x variants), flite, festival and, for the recipes that ask for
it, Kokoro-82M (recipes/common/kokoro.py: 28 neural English voices). A voice is the unit that
train, dev and test never share: HELD_OUT names the voices heard only in dev or test, and
`choose_voice` draws an engine by its share of the split, then one of its voices. In training, a
Kokoro voice is often mixed with another training voice of its accent: a speaker in between, so
that 23 voices give the model a continuum of speakers rather than 23 points.
"""

import shutil
import subprocess
import sys
from dataclasses import dataclass

import numpy as np

from recipes.common import SPLITS
from recipes.common import kokoro as kokoro_engine

ESPEAK_ACCENTS = ("en-gb", "en-us", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan",
                  "en-gb-x-gbcwmd", "en-029", "en-us-nyc")
# Human-sounding espeak-ng variants; whispering, echoing and robot variants are left out.
ESPEAK_VARIANTS = (
    "m1 m2 m3 m4 m5 m6 m7 m8 f1 f2 f3 f4 f5 klatt klatt2 klatt3 klatt4 klatt5 klatt6 croak "
    "grandpa grandma Alex Andy adam benjamin boris david edward Gene Mike max paul pedro robert "
    "quincy michel Hugo john norbert Storm travis victor Annie Andrea Alicia aunty "
    "belinda linda anika steph shelby"
).split()
FLITE_SKIP = {"awb_time"}  # a limited-domain voice: it can only say clock times
# Voices heard only in dev or test, keyed by (engine, espeak variant or voice name). Each split
# keeps the same kinds of espeak variants: male, female, klatt, named ones. flite's natural male
# voices awb and rms are the nearest to a person: awb trains, rms is held out for test; dev
# holds festival's ked instead. Kokoro holds out American and British, female and male voices: two
# for dev, three for test.
HELD_OUT = {
    **{("espeak-ng", v): "dev" for v in ("m4", "f3", "klatt3", "Andy", "linda")},
    **{("espeak-ng", v): "test" for v in ("m7", "f4", "klatt5", "robert", "Annie")},
    ("festival", "ked_diphone"): "dev",
    ("flite", "rms"): "test",
    **{("kokoro", v): "dev" for v in ("af_nicole", "bm_lewis")},
    **{("kokoro", v): "test" for v in ("af_sky", "am_michael", "bf_isabella")},
}
# Share of each engine's voices per split. Training leans on flite's voices (twice their share
# in dev and test): they are the nearest to people, and espeak-ng's many formant voices are
# easier to generalise across than from them to a human-like voice. festival is 5-10x slower
# than flite (it loads its voice per call); its voices are kal and ked (diphone, like flite's
# kal) and an HTS slt. Kokoro's neural voices, where a recipe asks for them, are the nearest to
# people of all: 45% of every split. The weights are relative (choose_voice normalises those of the
# engines present), so Kokoro's is 0.45 / 0.55 beside the others' 1: without it, the others'
# numbers and hence every draw are what they were before Kokoro came.
ENGINE_WEIGHTS = {"train": {"espeak-ng": 0.62, "flite": 0.36, "festival": 0.02, "kokoro": 0.45 / 0.55},
                  "held_out": {"espeak-ng": 0.8, "flite": 0.18, "festival": 0.02, "kokoro": 0.45 / 0.55}}
# Mean pitch range (Hz) per flite voice; rms ignores the setting. slt spans male and female
# pitch: with the warp (synthesis.WARP_RANGE) it and awb stand in for the natural voices of people.
FLITE_F0 = {"kal": (85, 130), "kal16": (85, 130), "awb": (100, 150), "slt": (95, 230)}
# Share of training draws of a Kokoro voice that mix it with another training voice of the same
# accent (American or British: the first voice picks the lexicon), and the range of its weight.
KOKORO_MIX_SHARE = 0.5
KOKORO_MIX_WEIGHT = (0.25, 0.75)


@dataclass(frozen=True, order=True)
class Voice:
    """A synthetic voice: the unit that train, dev and test never share."""

    engine: str
    variant: str  # espeak-ng variant (m3, klatt2, ...) or the flite/festival voice name
    accent: str = ""  # espeak-ng language, e.g. en-gb-scotland

    @property
    def name(self) -> str:
        return f"{self.accent}+{self.variant}" if self.accent else self.variant


def _output(args: list[str]) -> str:
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def espeak_voices() -> list[Voice]:
    """The curated accents x variants that this espeak-ng installation has."""
    listed = [line.split() for line in _output(["espeak-ng", "--voices=en"]).splitlines()[1:]]
    accents = {cols[1] for cols in listed if len(cols) > 4 and not cols[4].startswith("mb/")}
    listed = [line.split() for line in _output(["espeak-ng", "--voices=variant"]).splitlines()[1:]]
    variants = {cols[4].removeprefix("!v/") for cols in listed if len(cols) > 4}
    return [Voice("espeak-ng", variant, accent) for accent in ESPEAK_ACCENTS if accent in accents
            for variant in ESPEAK_VARIANTS if variant in variants]


def flite_voices() -> list[Voice]:
    names = _output(["flite", "-lv"]).partition(":")[2].split()
    return [Voice("flite", name) for name in names if name not in FLITE_SKIP]


def festival_voices() -> list[Voice]:
    listed = _output(["festival", "-b", "(print (voice.list))"]).strip("()\n ").split()
    return [Voice("festival", name) for name in listed if name != "nil"]  # nil: no voices


def kokoro_voices() -> list[Voice]:
    return [Voice("kokoro", name) for name in kokoro_engine.english_voices()]


def discover_voices(kokoro: bool = False) -> list[Voice]:
    """All usable voices, Kokoro's only if asked for (a corpus made without them stays the same);
    a missing optional engine is skipped with a note."""
    if shutil.which("espeak-ng") is None:
        sys.exit("error: espeak-ng not found; install it with `apt-get install espeak-ng`")
    voices = espeak_voices()
    for engine, needs, find in (("flite", ("flite",), flite_voices),
                                ("festival", ("festival", "text2wave"), festival_voices)):
        if all(shutil.which(program) for program in needs):
            voices += find()
        else:
            print(f"note: {engine} not found, skipping its voices (apt-get install {engine})")
    if kokoro:
        if kokoro_engine.available():
            voices += kokoro_voices()
        else:
            print("note: Kokoro is not set up, skipping its voices (bash tools/setup_kokoro.sh)")
    return sorted(voices)


def split_voices(voices: list[Voice]) -> dict[str, list[Voice]]:
    """Voices per split: the HELD_OUT ones in dev or test, all others in train."""
    splits: dict[str, list[Voice]] = {name: [] for name in SPLITS}
    for voice in voices:
        splits[HELD_OUT.get((voice.engine, voice.variant), "train")].append(voice)
    return splits


def choose_voice(voices: list[Voice], split: str, rng: np.random.Generator) -> Voice:
    """An engine by the split's ENGINE_WEIGHTS (among those present), then one of its voices
    uniformly; in training, a Kokoro voice is mixed with another one KOKORO_MIX_SHARE of the time
    (`mix_kokoro`). Held-out splits hear their voices as they are."""
    shares = ENGINE_WEIGHTS["train" if split == "train" else "held_out"]
    engines = sorted({voice.engine for voice in voices})
    weights = np.array([shares[engine] for engine in engines])
    engine = engines[rng.choice(len(engines), p=weights / weights.sum())]
    candidates = [voice for voice in voices if voice.engine == engine]
    voice = candidates[rng.integers(len(candidates))]
    if split == "train" and engine == "kokoro" and rng.random() < KOKORO_MIX_SHARE:
        return mix_kokoro(voice, candidates, rng)
    return voice


def mix_kokoro(voice: Voice, candidates: list[Voice], rng: np.random.Generator) -> Voice:
    """`voice` mixed with another of `candidates` of its accent (the first letter of its name),
    weighted `voice` w and the other 1 - w, w in KOKORO_MIX_WEIGHT; `voice` itself when it has no
    such partner."""
    partners = [other for other in candidates
                if other.variant[0] == voice.variant[0] and other != voice and "+" not in other.variant]
    if not partners:
        return voice
    partner = partners[rng.integers(len(partners))]
    weight = round(float(rng.uniform(*KOKORO_MIX_WEIGHT)), 2)
    return Voice("kokoro", f"{voice.variant}*{weight:g}+{partner.variant}*{1 - weight:.2g}")
