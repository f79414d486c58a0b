"""Grammar search: compile time, memory of the grammar's structures, and decoding speed.

    python -m benchmarks.grammar --model exp/picovoice_coffee_maker \\
        --grammar ../shared/data/grammars/picovoice_coffee_maker.yaml \\
        --manifest data/picovoice_coffee_maker/test.jsonl

Prints, for one grammar and one model: the time to read and compile the grammar and the size
of its graph; the real-time factor of decoding the manifest's utterances one at a time (batch
1, --threads threads) inside the grammar and freely, alternating round by round (medians);
the memory the grammar's structures hold after those searches (the graph, the search states
and token masks it remembered; tracemalloc, Python objects and tensors' storage not counted
apart); and the command acceptance of each search on those utterances.
"""

import statistics
import time
import tracemalloc
from pathlib import Path

import torch

from asr.assistant.intents import (
    IntentParser,
    acceptance,
    calibrated_confidence,
    free_text,
    read_commands,
)
from asr.audio import load_audio
from asr.grammar import Grammar
from asr.transcriber import Transcriber
from benchmarks.harness import base_parser, machine, set_threads


def compile_grammar(path: Path) -> tuple[Grammar, float]:
    start = time.perf_counter()
    grammar = Grammar.load(path)
    return grammar, time.perf_counter() - start


def decode_all(transcriber: Transcriber, waves: list[torch.Tensor]) -> tuple[list, float]:
    """Each wave alone (batch 1); the seconds it took in all."""
    start = time.perf_counter()
    found = [transcriber.transcribe_scored([wave])[0] for wave in waves]
    return found, time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--grammar", type=Path, required=True)
    parser.add_argument("--manifest", type=Path, required=True,
                        help="utterances with intent and slots (a voice_commands test.jsonl)")
    parser.add_argument("--limit", type=int, default=40, help="utterances decoded per round")
    args = parser.parse_args(argv)
    set_threads(args.threads)
    tracemalloc.start()
    grammar, seconds = compile_grammar(args.grammar)
    compiled_bytes = tracemalloc.get_traced_memory()[0]
    inside = Transcriber.from_pretrained(args.model, device="cpu", vad=None,
                                         grammar=str(args.grammar))
    free = Transcriber.from_pretrained(args.model, device="cpu", vad=None)
    rows = read_commands(args.manifest)[:args.limit]
    waves = [load_audio(path, inside.sample_rate) for path, _, _ in rows]
    audio_seconds = sum(len(w) for w in waves) / inside.sample_rate
    before = tracemalloc.get_traced_memory()[0]
    times: dict[str, list[float]] = {"grammar": [], "free": []}
    found: dict[str, list] = {}
    for _ in range(args.rounds):
        for name, transcriber in (("grammar", inside), ("free", free)):
            found[name], elapsed = decode_all(transcriber, waves)
            times[name].append(elapsed / audio_seconds)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    print(f"{args.grammar}: {grammar.count():.3g} sentences, {len(grammar.expressions)} "
          f"expressions; compiled in {seconds:.3f} s into {len(grammar.automaton.empty)} nodes, "
          f"{grammar.automaton.arcs} arcs ({compiled_bytes / 1e6:.1f} MB)")
    print(f"after {args.rounds} rounds: {inside.grammar.automaton.states_held} search states, "
          f"{len(inside.task.token_grammar._masks)} token masks remembered "
          f"(+{grown / 1e6:.1f} MB, decoding's own allocations included)")
    print(f"{machine()['cpu']}, {args.threads} threads, {len(waves)} utterances "
          f"({audio_seconds:.0f} s of audio), batch 1, median of {args.rounds} rounds:")
    for name in times:
        chosen = calibrated_confidence(args.model) if name == "grammar" else 0.0
        search = IntentParser(grammar, name, min_confidence=chosen)
        report = acceptance([(intent, slots, search.parse(text, hyp, free=free_text(inside, hyp)))
                             for (_, intent, slots),
                             (text, hyp) in zip(rows, found[name], strict=True)])
        print(f"  {name:8s} RTF {statistics.median(times[name]):.4f}   command acceptance "
              f"{100 * report['command_acceptance']:.1f}% (min_confidence "
              f"{search.min_confidence})")


if __name__ == "__main__":
    main()
