"""The voice-command demo end to end: spoken commands in, intents and actions out, safely.

CI has no trained voice-command model, so this module trains its own: eight commands spoken by
three espeak-ng voices (synthesised here, each twice with a random level and silence around
it), `model=tiny`, trained until it transcribes every command of every voice (a few hundred
steps, ~15 s of CPU). The five-command recording is a new stream made of those voices'
commands with pauses between them: what the test checks is the demo's path (endpointing a
continuous stream, recognition, intent, action), not the model's generalisation.
"""

import io
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from scripted_demo import ScriptedTranscriber, actions_of, run_demo
from scripted_demo import stream as yes_stream

from asr.assistant.actions import ActionsConfig, Assistant
from asr.assistant.demo import Console, Turn, VoiceDemo, build, file_blocks, load_config, main
from asr.assistant.intents import Intent, IntentParser, calibrated_confidence
from asr.audio import load_audio
from asr.checkpoint import save_model_dir
from asr.decoding import Hypothesis
from asr.grammar import Grammar
from asr.train import Trainer
from asr.transcriber import Transcriber
from asr.vad import SpeechSpan, VADConfig
from helpers import train_config, write_manifest
from recipes.voice_commands.prepare import DEFAULT_GRAMMAR

pytestmark = [pytest.mark.tier("slow"), pytest.mark.data]

RATE = 16000
COMMANDS = ("show me my photos", "show me my music", "what time is it", "turn on the lights",
            "turn off the radio", "next song", "open the browser", "cancel")
VOICES = ("en-us+m3", "en-gb+f2", "en-gb-scotland+m1")
SPOKEN = ("show me my photos", "turn on the lights", "what time is it", "open the browser",
          "next song")
EXPECTED = [("show_files", {"kind": "photos"}), ("switch", {"state": "on", "device": "lights"}),
            ("time", {}), ("open_app", {"app": "browser"}), ("next_song", {})]
HOSTILE = ("delete all my files", "run rm -rf", "show me my files in /etc")
OTHER = "what a lovely day it is"  # speech that is no command: trained as the empty text


def speak(text: str, voice: str, path: Path) -> np.ndarray:
    """espeak-ng's rendering of `text` at the model's rate."""
    subprocess.run(["espeak-ng", "-v", voice, "-s", "160", "-w", str(path), text], check=True)
    return load_audio(path, RATE).numpy()


def stream(clips: list[np.ndarray], pause: float = 1.0, seed: int = 0) -> np.ndarray:
    """Clips with pauses around them and a faint noise floor, as one recording."""
    gap = np.zeros(int(pause * RATE), np.float32)
    wave = np.concatenate([gap] + [part for clip in clips for part in (0.8 * clip, gap)])
    return wave + 1e-4 * np.random.default_rng(seed).standard_normal(len(wave)).astype(np.float32)


def demo_heard(model_dir: Path, tmp: Path, wave: np.ndarray) -> list[str]:
    """What the demo transcribes, turn by turn, from `wave` played to it."""
    sf.write(tmp / "stream.wav", wave, RATE, subtype="PCM_16")
    cfg = load_config([f"model_dir={model_dir}", f"actions.home={tmp}", "device=cpu"])
    demo = build(cfg, Console(lambda line: None))
    return [t.text for t in demo.run(file_blocks(tmp / "stream.wav", RATE,
                                                 RATE * cfg.block_ms // 1000))]


@pytest.fixture(scope="module")
def command_model(tmp_path_factory) -> dict:
    """A tiny model trained on the commands until it gets every one of every voice right."""
    tmp = tmp_path_factory.mktemp("commands")
    clips = {(voice, text): speak(text, voice, tmp / "say.wav") for voice in VOICES
             for text in (*COMMANDS, OTHER)}
    rng = np.random.default_rng(0)
    entries = []
    for (voice, text), clip in clips.items():
        for _ in range(2):  # two takes: a random level, silence and noise floor
            silence = [np.zeros(int(rng.uniform(0, 0.5) * RATE), np.float32) for _ in range(2)]
            take = np.concatenate([silence[0], clip * rng.uniform(0.4, 1.0), silence[1]])
            take += rng.uniform(3e-5, 3e-4) * rng.standard_normal(len(take)).astype(np.float32)
            path = tmp / f"{voice}-{len(entries)}.wav"
            sf.write(path, take, RATE)
            entries.append((path, "" if text == OTHER else text))
    manifest = write_manifest(tmp / "train.jsonl", entries)
    dev = write_manifest(tmp / "dev.jsonl", entries[::12])
    model_dir = tmp / "model"
    for steps in range(300, 1801, 150):  # runs differ a little run to run
        trainer = Trainer(train_config(
            tmp, manifest, f"data.dev_manifest={dev}", f"trainer.max_steps={steps}",
            "trainer.max_epochs=1000", f"trainer.resume={str(steps > 300).lower()}",
            "data.batch_size=8", "tokenizer.vocab_size=100", "tokenizer.letters=false",
            "scheduler=constant",
            "optim.lr=2e-3", "decode=greedy", "trainer.device=cpu"))
        trainer.fit()
        # The last weights, not the best-on-dev ones: dev is four clips and is perfect early.
        save_model_dir(model_dir, trainer.model, trainer.tokenizer, trainer.cfg)
        shutil.copy(DEFAULT_GRAMMAR, model_dir / "grammar.yaml")
        # The toy model's grammar-search confidence is its own, uncalibrated: its threshold is
        # low, as `asr-intents calibrate` would set it, so that a command it hears right is taken
        # (what is no command it hears as nothing, checked below).
        (model_dir / "intents.json").write_text('{"min_confidence": 0.05}')
        # "Right" as the demo hears them: each voice's commands in one stream, through the demo
        # itself (its endpointing decodes early, on cuts of its own).
        transcriber = Transcriber.from_pretrained(model_dir, device="cpu")
        wrong = {voice: said for voice, said in zip(VOICES, transcriber.transcribe_waves(
            [torch.from_numpy(clips[(voice, OTHER)]) for voice in VOICES]), strict=True) if said}
        for voice in VOICES:
            heard = demo_heard(model_dir, tmp, stream([clips[(voice, text)] for text in COMMANDS]))
            wrong |= {(voice, text): said for text, said in zip(COMMANDS, heard, strict=False)
                      if said != text} | ({} if len(heard) == len(COMMANDS) else {voice: heard})
        # ...and the voices taking turns, as the tests below play them
        mixed = demo_heard(model_dir, tmp, stream(mixed_clips(clips)))
        wrong |= {} if mixed == list(SPOKEN) else {"voices in turn": mixed}
        if not wrong:
            break
    assert wrong == {}, f"after {steps} steps the test model still mishears {wrong}"
    losses = [epoch["train_loss"] for epoch in trainer.state.history]
    assert losses[-1] < losses[0] / 10
    print(f"test model: right after {steps} steps")
    return {"dir": model_dir, "clips": clips, "tmp": tmp}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "Pictures").mkdir(parents=True)
    (home / "Pictures" / "beach.jpg").write_text("jpeg")
    (home / "etc").symlink_to("/etc")
    return home


def overrides(model: dict, home: Path) -> list[str]:
    return [f"model_dir={model['dir']}", f"actions.home={home}", "device=cpu"]


def mixed_clips(clips: dict) -> list[np.ndarray]:
    """The SPOKEN commands, each by the next voice in turn."""
    return [clips[(VOICES[i % len(VOICES)], text)] for i, text in enumerate(SPOKEN)]


def five_commands(model: dict, path: Path) -> Path:
    sf.write(path, stream(mixed_clips(model["clips"])), RATE, subtype="PCM_16")
    return path


def test_five_spoken_commands_give_five_intents_in_order(command_model, home, tmp_path):
    wav = five_commands(command_model, tmp_path / "five.wav")
    lines: list[str] = []
    cfg = load_config(overrides(command_model, home))
    demo = build(cfg, Console(lines.append))
    turns = demo.run(file_blocks(wav, RATE, RATE * cfg.block_ms // 1000))
    assert [(t.intent.name, t.intent.slots) for t in turns] == EXPECTED
    assert [t.text for t in turns] == list(SPOKEN)
    assert any(line.startswith("partial: ") for line in lines)  # while each command is said
    lines = [line for line in lines if not line.startswith("partial: ")]
    assert turns[0].result == f"1 photo in {home}: 1. Pictures/beach.jpg"
    assert turns[3].result == "Would open the browser: firefox (launching is off: actions.launch)."
    # Each is a whole grammar sentence: acted on after early_ms (150 ms) of silence, give or
    # take one 30 ms frame, not the endpointer's 400 ms.
    assert all(t.early and 0.12 <= t.wait <= 0.19 and t.latency > t.wait for t in turns)
    starts = [t.start for t in turns]
    assert starts == sorted(starts) and all(b - a > 1.0 for a, b in zip(starts, starts[1:], strict=False))
    assert lines[2::5] == [f"  intent: {t.intent.describe()}" for t in turns]
    assert lines[1::5] == [f"  match: \"{t.text}\" (confidence {t.intent.confidence:.2f})"
                           for t in turns]  # the grammar search's: exp(-garbage ratio) x agreement
    assert lines[0::5] == [f"[{t.start:.2f}-{t.end:.2f} s] heard: \"{t.intent.heard}\""
                           for t in turns]  # the CTC head's free path


def test_without_early_endpointing_the_endpointer_waits_its_silence(command_model, home, tmp_path):
    wav = five_commands(command_model, tmp_path / "five.wav")
    cfg = load_config([*overrides(command_model, home), "early_ms=0"])
    turns = build(cfg, Console(lambda line: None)).run(
        file_blocks(wav, RATE, RATE * cfg.block_ms // 1000))
    assert [(t.intent.name, t.intent.slots) for t in turns] == EXPECTED
    # end_silence_ms (400 ms) of silence, give or take one 30 ms frame.
    assert all(not t.early and 0.36 <= t.wait <= 0.43 for t in turns)


def test_speech_resuming_after_an_early_command_continues_it(command_model, home):
    """"show me my photos" acted on early, then "please" within the endpointer's silence: the
    same command, not done twice; other speech, or speech after a longer pause, is its own."""
    demo = build(load_config(overrides(command_model, home)), Console(lambda line: None))
    intent = demo.parser.parse("show me my photos", Hypothesis([], 0.0, 0.0, 0.9))
    early = Turn(1.0, 2.5, "show me my photos", intent, "done", 0.2, 0.15, early=True)
    late = Turn(1.0, 2.5, "show me my photos", intent, "done", 0.5, 0.4, early=False)
    soon, later = (SpeechSpan(start, start + 0.5, np.zeros(8000, np.float32))
                   for start in (2.7, 3.5))
    assert demo.continued(soon, "please", [early]) is early
    assert demo.continued(soon, "what time is it", [early]) is None
    assert demo.continued(later, "please", [early]) is None
    assert demo.continued(soon, "please", [late]) is None
    with pytest.raises(ValueError, match="early_ms must be in"):
        build(load_config([*overrides(command_model, home), "early_ms=500"]), Console())


# ---------------------------------------------------------------------------- what it heard

GRAMMAR_SEARCH = IntentParser(Grammar.load(DEFAULT_GRAMMAR), min_confidence=0.4)


def said_turn(parser: IntentParser, found: tuple[str, Intent], home: Path) -> list[str]:
    """The lines the demo prints for one utterance (0.52-2.10 s) recognised as `found`: the
    search's text and the intent parsed of it."""
    lines: list[str] = []
    demo = VoiceDemo(ScriptedTranscriber([]), parser, Assistant(ActionsConfig(home=str(home))),
                     VADConfig(), RATE, Console(lines.append))
    span = SpeechSpan(0.52, 2.10, np.zeros(int(1.58 * RATE), np.float32))
    demo.turn(span, found, int(2.25 * RATE), time.monotonic(), 2.10)
    assert re.fullmatch(r"  latency: 0\.15 s \(0\.15 s waiting for the end of speech, "
                        r"0\.\d\d s recognition and action\)", lines[-1]), lines
    return lines[:-1]


def test_the_grammar_search_prints_what_was_said_and_the_sentence_it_matched(home):
    """The grammar search writes a grammar sentence whatever was said: the free path, what was
    said, is printed apart from it. The confidence is exp(-garbage ratio 0) x the agreement of
    the two, 23/24 characters."""
    heard = Hypothesis([], 0.0, 0.0, 0.9, garbage_ratio=0.0)
    sentence = "show me my photos please"
    intent = GRAMMAR_SEARCH.parse(sentence, heard, free="Show me my photo, please")
    assert said_turn(GRAMMAR_SEARCH, (sentence, intent), home) == [
        '[0.52-2.10 s] heard: "show me my photo please"',
        '  match: "show me my photos please" (confidence 0.96)',
        "  intent: show_files kind=photos",
        f"  action: 1 photo in {home}: 1. Pictures/beach.jpg"]


def test_speech_that_is_no_command_is_printed_as_said_and_refused(home):
    """The sentence forced onto other speech is only the closest; the answer quotes what was
    said. Confidence: exp(-1) x 6/17 characters of agreement = 0.13."""
    heard = Hypothesis([], 0.0, 0.0, 0.9, garbage_ratio=1.0)
    intent = GRAMMAR_SEARCH.parse("what time is it", heard, free="what a lovely day")
    assert said_turn(GRAMMAR_SEARCH, ("what time is it", intent), home) == [
        '[0.52-2.10 s] heard: "what a lovely day"',
        '  match: none (closest: "what time is it", confidence 0.13; needs 0.40)',
        "  intent: none",
        "  action: Sorry, I did not understand: what a lovely day"]


def test_the_free_search_prints_its_transcript_and_the_nearest_sentence(home):
    parser = IntentParser(Grammar.load(DEFAULT_GRAMMAR), search="free", min_confidence=0.5)
    transcript = "show me my photo please"
    intent = parser.parse(transcript, Hypothesis([], 0.0, 0.0, 0.8))
    assert said_turn(parser, (transcript, intent), home) == [
        '[0.52-2.10 s] heard: "show me my photo please"',
        f'  match: "show me my photos please" (similarity {intent.similarity:.2f}, '
        "acoustic confidence 0.80)",
        "  intent: show_files kind=photos",
        f"  action: 1 photo in {home}: 1. Pictures/beach.jpg"]


class HearingTranscriber(ScriptedTranscriber):
    """A grammar search that writes the script's sentences, its free path hearing what the
    script says was said (a character per token)."""

    def __init__(self, script: list[tuple[str, str]]) -> None:
        self.script, self.tokenizer = list(script), self

    def transcribe_scored(self, waves: list[torch.Tensor], align: bool = False) -> list:
        sentence, said = self.script.pop(0)
        return [(sentence, Hypothesis([], 0.0, 0.0, 1.0, garbage_ratio=0.0,
                                      free_tokens=[ord(c) for c in said]))]

    def decode(self, ids: list[int]) -> str:
        return "".join(map(chr, ids))


def test_speech_resuming_continues_the_command_as_said_not_as_a_sentence(tmp_path):
    """"show me my photos" acted on early, then "please": the grammar search of "please" alone
    writes some whole sentence ("cancel"); what was said goes on from the command. (The
    second utterance is decoded twice: after `early_ms` of silence, and at its end.)"""
    lines: list[str] = []
    transcriber = HearingTranscriber([("show me my photos", "show me my photos"),
                                      ("cancel", "please"), ("cancel", "please")])
    demo = VoiceDemo(transcriber, GRAMMAR_SEARCH, Assistant(ActionsConfig(home=str(tmp_path))),
                     VADConfig(), RATE, Console(lines.append), early_ms=150)
    sf.write(tmp_path / "two.wav", yes_stream([0.5, 0.3]), RATE, subtype="PCM_16")
    turns = demo.run(file_blocks(tmp_path / "two.wav", RATE, RATE * 30 // 1000))
    assert [(t.early, t.text, t.intent.heard) for t in turns] == [
        (True, "show me my photos", "show me my photos"), (False, "cancel", "please")]
    assert actions_of(lines) == [f"0 photos in {tmp_path}.",
                                 '(the rest of "show me my photos": already done)']


def test_acoustic_confidence_is_lower_for_audio_that_did_not_say_it(command_model):
    """The same transcript scored against the audio that said it and against speech that is
    no command: the confidence the demo uses to refuse must tell them apart."""
    from asr.decoding import encode, teacher_forced

    transcriber = Transcriber.from_pretrained(command_model["dir"], device="cpu")
    ids = transcriber.tokenizer.encode("turn on the lights")
    for voice in VOICES:
        waves = [torch.from_numpy(command_model["clips"][(voice, text)])
                 for text in ("turn on the lights", OTHER)]
        lengths = torch.tensor([len(w) for w in waves])
        wave = torch.nn.utils.rnn.pad_sequence(waves, batch_first=True)
        memory, memory_lengths = encode(transcriber.model, wave, lengths, 8)
        said, not_said = teacher_forced(transcriber.model, memory, memory_lengths, [ids, ids])[2]
        assert 0 < not_said < said <= 1 and said > 2 * not_said, (voice, said, not_said)


def test_file_and_stdin_take_the_same_path(command_model, home, tmp_path):
    """The command line on a WAV file and on raw PCM from stdin prints the same turns."""
    wav = five_commands(command_model, tmp_path / "five.wav")
    pcm = sf.read(wav, dtype="int16")[0].astype("<i2").tobytes()
    printed = {}
    for source, stdin in ((str(wav), None), ("-", io.BytesIO(pcm))):
        lines: list[str] = []
        assert main(["--input", source, *overrides(command_model, home)], stdin=stdin,
                    console=Console(lines.append)) == 0
        printed[source] = lines
        assert lines[0].endswith(f"listening to {source}")
        assert lines[-1] == "end of input: 5 utterances"
    same = [line for line in printed["-"][1:] if not line.startswith(("  latency", "  action: It is"))]
    assert same == [line for line in printed[str(wav)][1:]
                    if not line.startswith(("  latency", "  action: It is"))]


# ---------------------------------------------------------------------------- safety

_EVENTS: list[tuple[str, tuple]] | None = None  # audit events while recording, else None
_SPAWN = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
          "os.forkpty", "pty.spawn")
_FILES = ("open", "os.listdir", "os.scandir")


def _audit(event: str, args: tuple) -> None:
    if _EVENTS is not None and event.startswith(_SPAWN + _FILES + ("exec", "compile")):
        _EVENTS.append((event, args))


@pytest.fixture(scope="module")
def audit():
    """Records what the process opens, lists, compiles or spawns (PEP 578 audit hooks)."""
    sys.addaudithook(_audit)  # hooks cannot be removed: this one records only inside `with audit()`

    class Recording:
        def __enter__(self) -> list[tuple[str, tuple]]:
            global _EVENTS
            _EVENTS = []
            return _EVENTS

        def __exit__(self, *exc) -> None:
            global _EVENTS
            _EVENTS = None

    return Recording


def touched_paths(events: list[tuple[str, tuple]]) -> list[Path]:
    paths = [args[0] for event, args in events if event in _FILES and args]
    return [Path(p.decode() if isinstance(p, bytes) else p).resolve() for p in paths
            if isinstance(p, str | bytes)]


def test_hostile_speech_runs_nothing_and_reads_only_home(command_model, home, tmp_path, audit):
    clips = [speak(text, VOICES[0], tmp_path / "say.wav") for text in HOSTILE]
    wav = tmp_path / "hostile.wav"
    sf.write(wav, stream(clips, seed=1), RATE, subtype="PCM_16")
    lines: list[str] = []
    cfg = load_config(overrides(command_model, home))
    demo = build(cfg, Console(lines.append))
    demo.run(file_blocks(five_commands(command_model, tmp_path / "warm.wav"), RATE, 480))
    blocks = file_blocks(wav, RATE, 480)
    with audit() as events:
        turns = demo.run(blocks)
        for text in HOSTILE:  # and as text, whatever the recogniser would have made of it
            intent = demo.parser.parse(text)
            assert not intent.understood
        listed = demo.assistant.act("show_files", {"kind": "photos"})
    assert len(turns) == 3
    # The recording works: the listing just made walked the home folder, and nothing else.
    assert listed == f"1 photo in {home}: 1. Pictures/beach.jpg"
    assert home.resolve() in touched_paths(events)
    assert [e for e in events if e[0].startswith(_SPAWN + ("exec", "compile"))] == []
    outside = [p for p in touched_paths(events) if not p.is_relative_to(home.resolve())]
    assert outside == []
    assert not any("passwd" in line or "/etc" in line for line in lines)


@pytest.mark.subprocess
def test_apps_launch_only_from_the_table_after_yes(home, audit):
    with audit() as events:
        off = Assistant(ActionsConfig(home=str(home), apps={"calculator": ["true"]}))
        assert off.act("open_app", {"app": "calculator"}) == (
            "Would open the calculator: true (launching is off: actions.launch).")
        on = Assistant(ActionsConfig(home=str(home), launch=True, apps={"calculator": ["true"]}))
        assert on.act("open_app", {"app": "browser"}) == "No program is configured for the browser."
        assert on.act("open_app", {"app": "calculator"}) == "Open the calculator (true)? Say yes or no."
        assert on.act("word", {"word": "no"}) == "Cancelled: open the calculator."
        assert [e for e in events if e[0].startswith(_SPAWN)] == []
        on.act("open_app", {"app": "calculator"})
        assert on.act("word", {"word": "yes"}).startswith("Opened the calculator (pid ")
    assert [list(args[1]) for event, args in events if event == "subprocess.Popen"] == [["true"]]
    on.launched["calculator"].wait(timeout=10)


def test_intents_from_files_and_a_scored_manifest(command_model, tmp_path, capsys):
    """python -m asr.assistant.intents: intent and slots per file (JSON too), a non-command refused, and
    `evaluate` scoring intent and slots of a manifest."""
    from asr.assistant.intents import DEFAULT_MIN_CONFIDENCE
    from asr.assistant.intents import main as intents_main

    files = {}
    for text in ("turn on the lights", "next song", OTHER):
        files[text] = tmp_path / f"{text.replace(' ', '_')}.wav"
        sf.write(files[text], command_model["clips"][(VOICES[1], text)], RATE)
    model = str(command_model["dir"])
    assert intents_main(["--model", model, "--json", *map(str, files.values())]) == 0
    found = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(f["name"], f["slots"]) for f in found] == [
        ("switch", {"state": "on", "device": "lights"}), ("next_song", {}), (None, {})]
    # the non-command: nothing heard, or a grammar sentence refused for its low confidence
    assert found[2]["text"] == "" or found[2]["confidence"] < DEFAULT_MIN_CONFIDENCE
    assert 0 < found[0]["acoustic"] <= 1
    rows = [{"audio_filepath": files["turn on the lights"].name, "intent": "switch",
             "slots": {"state": "on", "device": "lights"}},
            {"audio_filepath": files["next song"].name, "intent": "next_song"},
            {"audio_filepath": files[OTHER].name, "intent": None},
            {"audio_filepath": files["next song"].name, "intent": "time"}]
    manifest = tmp_path / "intents.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert intents_main(["evaluate", "--model", model, "--manifest", str(manifest),
                         "--json", str(tmp_path / "report.json")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("command acceptance: 66.67% of 3 commands")
    assert "non-commands accepted as commands: 0.00% of 1" in out
    assert "most often heard wrong (said -> heard, times):" in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["per_intent"]["time"] == {"n": 1, "acceptance": 0.0}
    assert report["confusions"] == [{"said": "time", "heard": "next_song", "n": 1}]
    lights, song, other = (str(files[t]) for t in ("turn on the lights", "next song", OTHER))
    assert [(r["audio_filepath"], r["right"], r["heard"]["intent"]) for r in report["results"]] \
        == [(lights, True, "switch"), (song, True, "next_song"), (other, True, None),
            (song, False, "next_song")]


def test_intents_command_line_errors_are_one_line(command_model, tmp_path, capsys):
    from asr.assistant.intents import main as intents_main

    model = str(command_model["dir"])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"audio_filepath": "nowhere.wav", "intent": "time"}\n')
    grammar = tmp_path / "g.yaml"
    grammar.write_text("context:\n  expressions:\n    a:\n      - '[x'\n")
    for argv, expected in (
            (["evaluate", "--model", model, "--manifest", str(bad)],
             f"error: {bad}:1: audio file not found"),
            (["--model", model, "--grammar", str(grammar), str(bad)],
             f"error: {grammar}:4: unclosed ["),
            (["--model", str(tmp_path), str(bad)], "error: "),
            (["--model", model, str(tmp_path / "none.wav")], f"error: {tmp_path / 'none.wav'}")):
        assert intents_main(argv) == 1
        # the toy model cannot spell every word of its grammar: one warning line may come first
        lines = [line for line in capsys.readouterr().err.strip().splitlines()
                 if not line.startswith("warning: ")]
        assert len(lines) == 1 and lines[0].startswith(expected), lines


# ---------------------------------------------------------------------------- errors


def test_live_mode_without_a_microphone_says_so_in_one_line():
    try:
        import sounddevice
        if any(device["max_input_channels"] > 0 for device in sounddevice.query_devices()):
            pytest.skip("this machine has a microphone")
    except (ImportError, OSError):
        pass  # no sounddevice or no PortAudio: the demo must say that instead
    lines: list[str] = []
    assert main(["model_dir=/nonexistent"], console=Console(lines.append)) == 1
    assert len(lines) == 1
    assert re.match(r"error: (no usable microphone: .+|live mode needs (the sounddevice package"
                    r"|PortAudio)) .*\(?use --input FILE\.wav", lines[0]), lines


def test_bad_input_and_bad_config_are_one_line(command_model, home, tmp_path):
    bad, silent = tmp_path / "notes.wav", tmp_path / "silent.wav"
    bad.write_text("not audio")
    sf.write(silent, np.zeros(RATE, np.float32), RATE)
    given = overrides(command_model, home)
    for argv, expected in (
            (["--input", str(bad), *given],
             f"error: {bad}: not readable as audio (Format not recognised.)"),
            (["--input", str(tmp_path / "none.wav"), *given],
             f"error: {tmp_path / 'none.wav'}: no such file"),
            (["--input", str(silent), *given, "vad.aggressiveness=5"],
             "error: vad.aggressiveness must be in [0, 3], got 5"),
            (["--input", str(silent), *given, "actions.enabled=[time,shell]"],
             "error: actions.enabled names unknown actions: ['shell']; known: "),
            (["--input", str(silent), "model_dir=/nonexistent"],
             "error: /nonexistent: not a model directory"),
            (["--input", str(silent), *given, f"grammar={bad}"],
             f"error: {bad}:1: no 'context:' mapping"),
            (["--input", str(silent), "no_such_key=1"], "error: Could not override 'no_such_key'")):
        lines: list[str] = []
        assert main(argv, console=Console(lines.append)) == 1
        assert len(lines) == 1 and lines[0].startswith(expected), lines


def test_config_fills_the_parts(tmp_path):
    cfg = load_config([])
    assert VADConfig(**cfg.vad) == VADConfig()
    grammar = Grammar.load(DEFAULT_GRAMMAR)
    intents = dict(cfg.intents)
    assert intents.pop("min_confidence") is None  # the model's calibrated one, else the default:
    assert calibrated_confidence(tmp_path) == IntentParser(grammar).min_confidence
    assert IntentParser(grammar, **intents) == IntentParser(grammar)
    assert cfg.grammar is None  # the model directory's own
    assert sorted(cfg.actions.enabled) == ActionsConfig().enabled  # every action, on


# ---------------------------------------------------------------------------- the stream's time


@pytest.mark.parametrize("stdin", [False, True])
@pytest.mark.parametrize(("gap", "expired"), [(3, False), (10, True), (60, True), (250, True)])
def test_a_question_expires_after_seconds_of_audio_read_faster_than_real_time(
        tmp_path, stdin, gap, expired):
    """"open the browser", then "yes" `gap` seconds of audio later: a file or stdin is read in
    a fraction of that, but the demo's time is the stream's (actions.confirm_seconds = 8)."""
    lines, assistant = run_demo(["open the browser", "yes"], [0.5, gap], tmp_path, stdin=stdin,
                                launch=True, apps={"browser": ["true"]})
    asked, answer = actions_of(lines)
    assert asked == "Open the browser (true)? Say yes or no."
    if expired:
        assert answer == "The question has expired (open the browser); say the command again."
        assert assistant.launched == {}
    else:
        assert answer.startswith("Opened the browser (pid ")
        assistant.launched["browser"].wait(timeout=10)


def test_timers_ring_where_the_stream_reaches_them(tmp_path):
    lines, _ = run_demo(["set a timer for five seconds", "set a timer for sixty minutes",
                         "what time is it"], [0.5, 1, 5], tmp_path)
    rung = lines.index("** Time is up: the timer for five seconds has run out.")
    heard = [i for i, line in enumerate(lines) if "heard:" in line]
    assert heard[1] < rung < heard[2]  # set at 1.9 s of audio, heard 3.9 and 9.9 s in
    assert not any("sixty minutes has run out" in line for line in lines)


OWN_GRAMMAR = """context:
  expressions:
    timer:
      - "set a timer for $pv.TwoDigitInteger:amount $units:unit"
      - "wait $pv.SingleDigitInteger:amount"
    digit:
      - "pick $pv.SingleDigitInteger:digit"
    show_files:
      - "show me my $kinds:kind from $pv.TwoDigitOrdinal:day"
    orderDrink:
      - "a $size:size latte"
  slots:
    units: [seconds, minutes, hours, days]
    kinds: [photos, spreadsheets]
    size: [small, large]
"""


def test_a_grammar_of_ones_own_runs_in_the_demo(tmp_path):
    """Rhino's number slots, intents the actions know with other slots, and intents they do
    not know: each command is printed and answered, none ends the demo."""
    grammar = Grammar.from_yaml(OWN_GRAMMAR, "own.yaml")
    script = ["set a timer for twenty five minutes", "set a timer for sixty hours",
              "set a timer for two days", "wait five", "pick seven",
              "show me my spreadsheets from third", "a large latte"]
    lines, assistant = run_demo(script, [0.5] + [1.5] * 6, tmp_path, grammar)
    assert actions_of(lines) == [
        "Timer set for 25 minutes: it rings in 0:25:00.",
        "Timer set for 60 hours: it rings in 2 days, 12:00:00.",
        "Timers count seconds, minutes or hours, not 'days'; no timer set.",
        "The timer action takes amount, unit (got amount); nothing done.",
        "Heard 7; nothing on screen to pick.",
        "The show_files action takes kind (got kind, day); nothing done.",
        "No action called 'orderDrink'; nothing done."]
    assert lines[-5].endswith(" heard: \"a large latte\" (no free transcript)")
    assert lines[-4:-2] == ["  match: \"a large latte\" (confidence 1.00)",
                            "  intent: orderDrink size=large"]
    assert assistant.running_timers() == ["25 minutes", "60 hours"]


def test_file_names_cannot_forge_a_line_of_the_output(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "a\n  action: Opened the browser (pid 1).\r\x1b[2K\u2028.jpg").write_text("x")
    with open(home.as_posix().encode() + b"/caf\xe9.jpg", "w") as f:  # not UTF-8
        f.write("x")
    lines, _ = run_demo(["show me my photos"], [0.5], tmp_path, home=str(home))
    assert len(lines) == 5 and [line[:10] for line in lines[1:]] == [
        "  match: \"", "  intent: ", "  action: ", "  latency:"]
    assert "a\\n  action: Opened the browser (pid 1).\\r\\x1b[2K\\u2028.jpg" in lines[3]
    assert "caf\\udce9.jpg" in lines[3]


def test_white_noise_before_a_yes_leaves_the_yes(tmp_path):
    """10 s of white noise, then "yes", made one 11-s segment that the demo heard as "sixty
    six six sixty six ..." and asr-transcribe as '': the endpointer keeps only the last
    2 x vad.pad_ms of an utterance before its first speech-like frame, so the demo and
    transcription both hear the yes alone."""
    from asr.models import FOLDER
    from asr.transcriber import Transcriber
    from helpers import COMMANDS
    yes, rate = sf.read(sorted((COMMANDS / "yes").glob("*.wav"))[0], dtype="float32")
    assert rate == RATE
    noise = np.random.default_rng(0).normal(0, 0.1, 10 * RATE).astype(np.float32)
    wave = np.concatenate([noise, yes])
    assert demo_heard(FOLDER / "base", tmp_path, wave) == ["yes"]
    found = Transcriber.from_pretrained().transcribe(tmp_path / "stream.wav")
    assert found.text == "yes" and found.segments[0].start >= 9.7
