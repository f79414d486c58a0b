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
from asr.data import ManifestError, read_manifest
from asr.lm import LM_FILE, LMDimensions, TokenLM, save_lm
from asr.progress import progress
from asr.scheduler import warmup_cosine
from asr.text import normalize_text
from asr.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer
from asr.training.options import TrainingError


def read_sentences(path: Path) -> list[str]:
    """Normalised non-empty lines of a text file, or the transcripts of a .jsonl manifest."""
    if path.suffix == ".jsonl":
        return [t for t in (normalize_text(u.text) for u in read_manifest(path)) if t]
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise TrainingError(f"{path}: cannot read ({err.strerror})") from None
    except UnicodeDecodeError:
        raise TrainingError(f"{path}: not UTF-8 text") from None
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


def check_args(args: argparse.Namespace) -> None:
    """A one-line TrainingError for settings that cannot train, before any work."""
    if not 0 < args.warmup_steps < args.steps:
        raise TrainingError(f"--warmup-steps ({args.warmup_steps}) must be between 0 and "
                            f"--steps ({args.steps})")
    if (args.out / LM_FILE).exists() and not args.overwrite:
        raise TrainingError(f"{args.out}: holds a language model already (pass --overwrite)")


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
    device = torch.device(args.device)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the recogniser whose tokenizer the LM uses")
    parser.add_argument("--text", type=Path, action="append", required=True,
                        help="training text, one sentence a line (repeatable)")
    parser.add_argument("--dev", type=Path, required=True, help="held-out text or manifest")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d-ff", type=int, default=1024)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--warmup-steps", type=int, default=200)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch-tokens", type=int, default=8192, help="padded pieces a batch")
    parser.add_argument("--max-tokens", type=int, default=256, help="longer sentences are cut")
    parser.add_argument("--eval-every", type=int, default=250)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        result = train(args)
    except (TrainingError, ManifestError, ModelDirError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"best dev loss {result['dev_loss']:.3f} per piece after {result['steps']} steps; "
          f"language model in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
