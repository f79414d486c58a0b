"""Exported graphs against the torch model: WER and real-time factor, side by side.

    python -m benchmarks.export --threads 2 --model exp/voice_commands \\
        --manifest data/voice_commands/test.jsonl [--limit 300] [--beam-size 1 --ctc-weight 0]

Exports the model (`python -m asr.export`) into a temporary folder, fp32 and int8 (dynamic
quantisation of every matrix product's weights), then decodes the same utterances with each
of torch fp32, onnx fp32 and onnx int8 using the model's saved decoding settings (or those
given), in batches as `asr.evaluate` does. Contenders alternate round by round
(`benchmarks.harness.alternate`), and each reports its WER, how many hypotheses equal
torch's, and its RTF: decoding seconds per audio second, median over rounds.
"""

import sys
import tempfile
from pathlib import Path

import torch

from asr.audio import load_audio
from asr.data import read_manifest
from asr.export import export_onnx, quantize_int8
from asr.metrics import error_rate
from asr.transcriber import Transcriber
from benchmarks.harness import alternate, base_parser, markdown_table, median, report, sample, set_threads


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="a trained model directory")
    parser.add_argument("--manifest", type=Path, required=True, help="utterances to decode")
    parser.add_argument("--limit", type=int, help="decode this many utterances (seeded sample)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--beam-size", type=int, help="override the model's decode.beam_size")
    parser.add_argument("--ctc-weight", type=float, help="override its decode.ctc_weight")
    args = parser.parse_args(argv)
    options = {key: value for key, value in (("beam_size", args.beam_size),
                                             ("ctc_weight", args.ctc_weight)) if value is not None}
    set_threads(args.threads)
    utterances = sample(read_manifest(args.manifest), args.limit, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        transcribers = load_contenders(args.model, Path(tmp),
                                       {"vad": None, "batch_size": args.batch_size, **options})
        rate = transcribers["torch fp32"].sample_rate
        waves = [load_audio(u.audio_filepath, rate) for u in utterances]
        audio_seconds = sum(len(w) for w in waves) / rate
        times, hypotheses = decode_alternating(transcribers, waves, args.rounds)
    results, rows = score(hypotheses, times, [u.text for u in utterances], audio_seconds)
    fp32, int8 = results["onnx fp32"], results["onnx int8"]
    table = markdown_table(["backend", "WER %", "RTF", "speed vs torch", "same as torch"], rows)
    decoding = transcribers["torch fp32"].options
    table += (f"\n\n{len(utterances)} utterances, {audio_seconds:.0f} s of audio, beam "
              f"{decoding.beam_size}, CTC weight {decoding.ctc_weight}, "
              f"{args.rounds} round(s), threads {torch.get_num_threads()}; int8 vs onnx fp32: "
              f"{fp32['rtf'] / int8['rtf']:.2f}x faster, WER "
              f"{100 * (int8['wer'] - fp32['wer']):+.2f} points")
    report(f"Export: torch vs ONNX on {args.manifest}", table,
           {"model": str(args.model), "manifest": str(args.manifest),
            "decoding": {"beam_size": decoding.beam_size, "ctc_weight": decoding.ctc_weight},
            "utterances": len(utterances), "audio_seconds": audio_seconds, "results": results},
           args.json)


def load_contenders(model: Path, tmp: Path, options: dict) -> dict[str, Transcriber]:
    """The torch model and its fp32 and int8 exports (written under `tmp`), as Transcribers."""
    export_onnx(model, tmp / "fp32")
    quantize_int8(tmp / "fp32", tmp / "int8")
    return {"torch fp32": Transcriber.from_pretrained(model, "cpu", **options),
            "onnx fp32": Transcriber.from_pretrained(tmp / "fp32", backend="onnx", **options),
            "onnx int8": Transcriber.from_pretrained(tmp / "int8", backend="onnx", **options)}


def decode_alternating(transcribers: dict[str, Transcriber], waves: list[torch.Tensor],
                       rounds: int) -> tuple[dict[str, list[float]], dict[str, list[str]]]:
    """Each contender's seconds per round and its (last round's) hypotheses."""
    hypotheses: dict[str, list[str]] = {}

    def run(name: str):
        return lambda: hypotheses.__setitem__(name, transcribers[name].transcribe_waves(waves))

    times = alternate({name: run(name) for name in transcribers}, rounds, warmup=0)
    return times, hypotheses


def score(hypotheses: dict[str, list[str]], times: dict[str, list[float]],
          references: list[str], audio_seconds: float) -> tuple[dict[str, dict], list[list[str]]]:
    """Each contender's WER, RTF and agreement with torch: the JSON results and the table rows."""
    torch_rtf = median(times["torch fp32"]) / audio_seconds
    results, rows = {}, []
    for name, found in hypotheses.items():
        rtf = median(times[name]) / audio_seconds
        same = sum(a == b for a, b in zip(found, hypotheses["torch fp32"], strict=True))
        results[name] = {"wer": error_rate(list(zip(references, found, strict=True))), "rtf": rtf,
                         "speedup_vs_torch": torch_rtf / rtf, "same_as_torch": same,
                         "seconds": times[name]}
        rows.append([name, f"{100 * results[name]['wer']:.2f}", f"{rtf:.4f}",
                     f"{torch_rtf / rtf:.2f}x", f"{same}/{len(found)}"])
    return results, rows


if __name__ == "__main__":
    sys.exit(main())
