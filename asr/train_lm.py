"""Train a language model for a recogniser: `python -m asr.train_lm --model DIR --text FILE --out LM`.

Text files hold one sentence per line (normalised here as transcripts are); `--dev` is held-out
text (a text file or a manifest's transcripts) whose per-piece loss picks the weights kept. The
LM predicts the recogniser's own BPE pieces, so `--model` names the model directory whose
tokenizer it learns to speak; decode with `--lm LM --lm-weight W` (see `asr/lm.py`).
"""

import argparse
import math
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from asr.checkpoint import ModelDirError, load_model_dir
from asr.cli import ArgumentParser, float_in, int_in, print_error, quiet_pipe
from asr.data import ManifestError, read_manifest
from asr.device import pick_device
from asr.lm import LM_FILE, LMDimensions, TokenLM, save_lm
from asr.progress import progress
from asr.scheduler import warmup_cosine
from asr.text import normalize_text
from asr.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer
from asr.training.options import TrainingError
from asr.untrusted import UntrustedInputError, read_text

PROG = "asr-train-lm"  # the name usage errors begin with
MAX_TEXT_BYTES = 4 << 30  # one text file: a large LM corpus, read whole


def read_sentences(path: Path) -> list[str]:
    """Normalised non-empty lines of a text file, or the transcripts of a .jsonl manifest."""
    if path.suffix == ".jsonl":
        return [t for t in (normalize_text(u.text) for u in read_manifest(path)) if t]
    try:
        lines = read_text(path, MAX_TEXT_BYTES, "the text file").splitlines()
    except UntrustedInputError as err:  # a FIFO, a device, too large, not UTF-8
        raise TrainingError(str(err)) from None
    return [t for t in (normalize_text(line) for line in lines) if t]


def encode(sentences: list[str], tokenizer: Tokenizer, max_tokens: int) -> list[Tensor]:
    """BOS + pieces + EOS per sentence, longer ones cut to `max_tokens`."""
    ids = tokenizer.sp.encode(sentences)
    return [torch.tensor([BOS_ID, *s[: max_tokens - 2], EOS_ID]) for s in ids]


def batches(sequences: list[Tensor], batch_tokens: int, rng: random.Random) -> list[list[int]]:
    """Indices grouped by similar length (little padding), up to `batch_tokens` padded tokens
    a batch, in random order."""
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
    groups, current = [], []
    for i in order:
        if current and (len(current) + 1) * len(sequences[i]) > batch_tokens:
            groups.append(current)
            current = []
        current.append(i)
    if current:
        groups.append(current)
    rng.shuffle(groups)
    return groups


def loss_of(lm: TokenLM, sequences: list[Tensor], device: torch.device) -> tuple[Tensor, int]:
    """Summed cross-entropy of predicting each piece from the ones before, and the count."""
    tokens = pad_sequence(sequences, batch_first=True, padding_value=PAD_ID).to(device)
    logits = lm(tokens[:, :-1])
    targets = tokens[:, 1:]
    loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(),
                           ignore_index=PAD_ID, reduction="sum")
    return loss, int((targets != PAD_ID).sum())


@torch.no_grad()
def dev_loss(lm: TokenLM, sequences: list[Tensor], device: torch.device) -> float:
    """Mean loss per piece (nats) on held-out text."""
    lm.eval()
    total, count = 0.0, 0
    for group in batches(sequences, 8192, random.Random(0)):
        loss, n = loss_of(lm, [sequences[i] for i in group], device)
        total, count = total + float(loss), count + n
    lm.train()
    return total / count


def build_parser() -> ArgumentParser:
    """The options, each checked as it is parsed (a usage error on one line, status 2)."""
    parser = ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the recogniser whose tokenizer the LM uses")
    parser.add_argument("--text", type=Path, action="append", required=True,
                        help="training text, one sentence a line (repeatable)")
    parser.add_argument("--dev", type=Path, required=True, help="held-out text or manifest")
    parser.add_argument("--out", type=Path, required=True, help="the language model directory")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the language model --out holds")
    for option, default, high, what in [
            ("--d-model", 256, 16384, "width"), ("--layers", 4, 128, "Transformer layers"),
            ("--heads", 4, 256, "attention heads (must divide --d-model)"),
            ("--d-ff", 1024, 65536, "feed-forward width"), ("--steps", 4000, 1 << 30, "steps"),
            ("--warmup-steps", 200, 1 << 30, "steps of warmup"),
            ("--batch-tokens", 8192, 1 << 24, "padded pieces a batch"),
            ("--max-tokens", 256, 1 << 16, "longer sentences are cut"),
            ("--eval-every", 250, 1 << 30, "steps between dev evaluations")]:
        parser.add_argument(option, type=int_in(1, high), default=default, help=what)
    parser.add_argument("--dropout", type=float_in(0.0, 0.99), default=0.1)
    parser.add_argument("--lr", type=float_in(1e-12, 10.0), default=1e-3, help="peak learning rate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int_in(1, 1024), help="torch threads (default: torch's)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    return parser


def check_args(args: argparse.Namespace) -> None:
    """A one-line TrainingError for settings that cannot train, before any work."""
    if not 0 < args.warmup_steps < args.steps:
        raise TrainingError(f"--warmup-steps ({args.warmup_steps}) must be between 0 and "
                            f"--steps ({args.steps})")
    if args.out.exists() and not args.out.is_dir():
        raise TrainingError(f"{args.out}: not a folder; pick another --out")
    if (args.out / LM_FILE).exists() and not args.overwrite:
        raise TrainingError(f"{args.out}: holds a language model already (pass --overwrite)")
    if args.max_tokens < 3:
        raise TrainingError(f"--max-tokens must be at least 3 (BOS, a piece, EOS), got "
                            f"{args.max_tokens}")


def load_data(args: argparse.Namespace, tokenizer: Tokenizer) -> tuple[list[Tensor], list[Tensor]]:
    """The training and dev sentences (`--text`, `--dev`) as the tokenizer's pieces."""
    train_text = [s for path in args.text for s in read_sentences(path)]
    dev_text = read_sentences(args.dev)
    if not train_text or not dev_text:
        raise TrainingError(f"{args.text[0] if not train_text else args.dev}: no sentences")
    max_tokens = args.max_tokens
    return encode(train_text, tokenizer, max_tokens), encode(dev_text, tokenizer, max_tokens)


def train(args: argparse.Namespace) -> dict:
    """Train, evaluating on dev every `eval_every` steps; the best weights are saved."""
    check_args(args)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    device = pick_device(args.device)
    _, tokenizer, _ = load_model_dir(args.model, "cpu")
    train_set, dev_set = load_data(args, tokenizer)
    dims = LMDimensions(tokenizer.vocab_size, args.d_model, args.heads, args.d_ff, args.layers,
                        args.dropout)
    lm = TokenLM(dims).to(device)
    print(f"language model: {sum(p.numel() for p in lm.parameters()) / 1e6:.2f}M parameters, "
          f"{len(train_set)} sentences ({sum(len(s) for s in train_set)} pieces), "
          f"dev {len(dev_set)}", flush=True)
    optimizer = torch.optim.AdamW(lm.parameters(), lr=args.lr, weight_decay=0.01)
    schedule = warmup_cosine(optimizer, args.warmup_steps, args.steps)
    best, step, started = math.inf, 0, time.perf_counter()
    history = []
    bar = progress(total=args.steps, desc="training", unit="step")
    while step < args.steps:
        for group in batches(train_set, args.batch_tokens, rng):
            loss, count = loss_of(lm, [train_set[i] for i in group], device)
            optimizer.zero_grad()
            (loss / count).backward()
            torch.nn.utils.clip_grad_norm_(lm.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            step += 1
            bar.update()
            if step % args.eval_every == 0 or step == args.steps:
                dev = dev_loss(lm, dev_set, device)
                history.append({"step": step, "train": loss.item() / count, "dev": dev})
                mark = " (best)" if dev < best else ""
                bar.write(f"step {step}: train loss {loss.item() / count:.3f}, dev loss {dev:.3f} "
                          f"(perplexity {math.exp(dev):.2f} per piece){mark}, "
                          f"{time.perf_counter() - started:.0f} s", file=sys.stdout)
                sys.stdout.flush()
                if dev < best:
                    best = dev
                    save_lm(args.out, lm, tokenizer, {"dev_loss": dev, "step": step,
                                                      "history": history})
            if step == args.steps:
                break
    bar.close()
    return {"dev_loss": best, "steps": step}


@quiet_pipe
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        result = train(args)
    except (TrainingError, ManifestError, ModelDirError, ValueError, OSError) as err:
        print_error(err)
        return 1
    print(f"best dev loss {result['dev_loss']:.3f} per piece after {result['steps']} steps; "
          f"language model in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
