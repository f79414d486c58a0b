"""One optimiser step over a group of micro-batches: gradient accumulation, DDP, loss scaling
and clipping (`TrainStep`), and the helpers it is made of."""

from collections.abc import Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass

import torch

from asr.distributed import Distributed, all_reduce_sum
from asr.model import SpeechTransformer
from asr.training.options import autocast


@dataclass
class TrainStep:
    """The parts an optimiser step changes: `model` (as `train_model` calls it: in DDP,
    compiled), its optimiser, schedule and loss scaler."""

    model: SpeechTransformer
    train_model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    scaler: torch.amp.GradScaler
    dist: Distributed
    device: torch.device
    precision: str  # trainer.precision
    grad_clip: float  # trainer.grad_clip
    sample_rate: int

    def __call__(self, used: list[dict]) -> tuple[float, float, str | None]:
        """One step over the usable micro-batches `used` (the same number on every rank): the
        step's loss, the seconds of audio learnt from and, when the step was skipped, what was
        not finite ("loss" or "gradients").

        The model's losses are means over tokens; each micro-batch's is weighted by its share
        (`shares`) of the tokens of the whole step, every micro-batch on every rank (as fairseq
        normalises by its sample size), so a step is exactly the gradient of one big batch of
        all of them: W ranks accumulating A micro-batches equal one process accumulating
        W x A, or one batch that holds them all. DDP all-reduces on the last micro-batch's
        backward only (`no_sync` before it).
        """
        counts = [self.model.loss_tokens(b["tokens"]) for b in used]
        totals = self._step_tokens(counts)
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum, seconds, finite = self._backward(used, counts, totals)
        if self.dist.enabled:  # every rank takes the same decision, on the world's numbers
            bad, loss_sum, seconds = all_reduce_sum([float(not finite), loss_sum, seconds],
                                                    self.device)
            finite = bad == 0
        if not finite:
            self.optimizer.zero_grad(set_to_none=True)
            return loss_sum, 0.0, "loss"
        self.scaler.unscale_(self.optimizer)  # clip the true gradients, not the scaled ones
        norm = clip_gradients(self.model.parameters(), self.grad_clip)
        if not torch.isfinite(norm):
            self.scaler.update()  # fp16: a lower loss scale for the next step
            self.optimizer.zero_grad(set_to_none=True)
            return loss_sum, 0.0, "gradients"
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        return loss_sum, seconds, None

    def _backward(self, used: list[dict], counts: list[tuple[int, ...]], totals: list[int]
                  ) -> tuple[float, float, bool]:
        """Accumulate the micro-batches' gradients (`counts`: each one's tokens per loss): their
        summed loss, seconds of audio and whether every loss was finite."""
        loss_sum, seconds, finite = 0.0, 0.0, True
        for i, batch in enumerate(used):
            seconds += batch["lengths"].sum().item() / self.sample_rate
            shares = [n / total for n, total in zip(counts[i], totals, strict=True)]
            batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
            last = i == len(used) - 1
            with nullcontext() if last or not self.dist.enabled else self.train_model.no_sync():
                with autocast(self.device, self.precision):
                    loss = self.train_model(batch["wave"], batch["lengths"], batch["tokens"],
                                            shares)["loss"]
                finite = finite and bool(torch.isfinite(loss))
                if not finite and not self.dist.enabled:
                    break  # alone, skip the wasted backward; in DDP every rank must all-reduce
                # DDP divides the summed gradients by the world size: multiply it back
                self.scaler.scale(loss * self.dist.world_size).backward()
            loss_sum += loss.item()
        return loss_sum, seconds, finite

    def _step_tokens(self, counts: list[tuple[int, ...]]) -> list[int]:
        """The tokens each loss averages over in the whole step (all micro-batches and ranks),
        from each micro-batch's `counts`."""
        totals = [sum(per_loss) for per_loss in zip(*counts, strict=True)]
        if self.dist.enabled:
            totals = [int(n) for n in all_reduce_sum(totals, self.device)]
        return totals


def clip_gradients(parameters: Iterable[torch.nn.Parameter], max_norm: float) -> torch.Tensor:
    """Scale the gradients down to a total L2 norm of `max_norm` if they exceed it; the norm.

    `clip_grad_norm_` multiplies every gradient by min(1, max_norm / norm) on every step, so
    that a GPU never waits for the norm. The training step waits for it anyway (it checks that
    the norm is finite), and most steps are under the limit: multiplying only then saves a
    pass over all gradients.
    """
    params = [p for p in parameters if p.grad is not None]
    norm = torch.nn.utils.get_total_norm([p.grad for p in params])
    if norm > max_norm:
        torch.nn.utils.clip_grads_with_norm_(params, max_norm, norm)
    return norm


def micro_batch_groups(batches: Iterable[dict], size: int) -> Iterator[list[dict]]:
    """Consecutive groups of `size` batches (the last one may be shorter)."""
    group = []
    for batch in batches:
        group.append(batch)
        if len(group) == size:
            yield group
            group = []
    if group:
        yield group
