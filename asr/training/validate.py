"""Scoring during training: the dev loss and the greedy-decoding dev WER, over all ranks."""

from collections.abc import Iterable

import torch

from asr.decoding import DecodingOptions, DecodingTask
from asr.distributed import Distributed, gather_objects
from asr.metrics import error_rate
from asr.model import SpeechTransformer
from asr.tokenizer import Tokenizer
from asr.training.options import autocast


@torch.no_grad()
@torch.compiler.set_stance("force_eager")  # compiled layers (trainer.compile) are for training
def validate(model: SpeechTransformer, tokenizer: Tokenizer, batches: Iterable[dict],
             device: torch.device, precision: str, dist: Distributed) -> dict[str, float]:
    """Dev loss (no augmentation, no dropout) and greedy-decoding dev WER of this rank's
    share of the dev `batches`, combined with every other rank's, computed eagerly: a compiled
    layer would compile again for every dev shape and decoding step."""
    model.eval()
    loss_sum, count, pairs = 0.0, 0, []
    greedy = DecodingTask(model, DecodingOptions(beam_size=1))
    for batch in batches:
        batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
        with autocast(device, precision):
            losses = model(batch["wave"], batch["lengths"], batch["tokens"])
            texts = [tokenizer.decode(ids) for ids in greedy.run(batch["wave"], batch["lengths"])]
        loss_sum += losses["loss"].item()
        refs = [tokenizer.decode(row.tolist()) for row in batch["tokens"]]
        pairs.extend(zip(refs, texts, strict=True))
        count += 1
    if dist.enabled:  # each rank scored its share of dev: the scores need all of it
        shares = gather_objects((loss_sum, count, pairs), dist)
        loss_sum, count = sum(s[0] for s in shares), sum(s[1] for s in shares)
        pairs = [pair for share in shares for pair in share[2]]
    return {"dev_loss": loss_sum / max(count, 1), "dev_wer": error_rate(pairs)}
