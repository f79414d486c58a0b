"""A number slot must hold the number heard: the grammar search's sentence is checked against
the free transcript's numbers, not its letters alone ("zero minutes" set a 4-minute timer:
0.29 >= 0.28; "minus one minutes" a 19-minute one)."""

import shutil
import subprocess

import pytest

from asr.assistant.intents import IntentRecognizer
from asr.assistant.intents.numbers import numbers_differ, spoken_numbers

pytestmark = [pytest.mark.tier("slow"), pytest.mark.data]


@pytest.mark.parametrize(("text", "numbers"), [
    ("set a timer for zero minutes", [0]), ("minus one minutes", [-1]),
    ("nineteen minutes", [19]), ("twenty four seconds", [24]), ("two hundred and five", [205]),
    ("three thousand five hundred and twenty one", [3521]), ("four twenty", [4, 20]),
    ("one two three", [1, 2, 3]), ("a hundred", [100]), ("open the browser", []),
])
def test_spoken_numbers(text, numbers):
    assert spoken_numbers(text) == numbers


def test_a_changed_number_is_a_difference_a_missing_one_is_not():
    assert numbers_differ("set a timer for four minutes", "set a timer for zero minutes")
    assert numbers_differ("set a timer for nineteen minutes", "set a timer for minus one minutes")
    assert not numbers_differ("set a timer for four minutes", "set a timer for four minutes")
    assert not numbers_differ("set a timer for four minutes", "set a timer for minutes")
    assert not numbers_differ("open the browser", "open the browser one")


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng")
@pytest.mark.parametrize("said", ["set a timer for zero minutes",
                                  "set a timer for minus one minutes"])
def test_the_shipped_model_sets_no_timer_of_another_length(tmp_path, said):
    wav = tmp_path / "said.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-w", str(wav), said], check=True)
    intent = IntentRecognizer.from_pretrained("base").recognize([wav])[0]
    assert intent.name is None or intent.slots.get("amount") in (None, said.split()[-2]), intent
    assert spoken_numbers(intent.heard or "") == spoken_numbers(said), intent.heard
