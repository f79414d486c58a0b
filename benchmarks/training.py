"""Training throughput: our SpeechTransformer vs SpeechBrain's TransformerASR vs torch.nn.Transformer,
and where the time of our training step goes, on a machine whose matmul peak it measures.

    python -m benchmarks.training --threads 2 --rounds 7 --json bench_training.json
    python -m benchmarks.training --threads 2 experiment=voice_commands data.root=data/voice_commands

All three get the same front end (asr.features.FrontEnd, the config's frames stacked, a linear
projection; a config with conv2d subsampling races with stacked frames too, its own front end
timed in our step's parts below), the same sizes (conf/model/small.yaml unless overridden),
the same tied output layer and CTC head, the same loss (label-smoothed cross-entropy + 0.3
CTC), Adam and gradient clipping, and the same batches of real utterances (Speech Commands
words and cathy's read sentences, grouped by asr.data.DurationBatchSampler). Only the
Transformer in between differs. A step is forward + loss + backward + clip + optimiser step;
waveforms are in memory (data loading is measured by bench_data.py). Each round runs every
batch once per contender; contenders alternate round by round and the median round is
reported.

Then our step part by part, as training runs it in one process (data.num_workers=0): reading
and padding the batch from disk, augmenting each utterance as `data.augment` says (off in the
default config; the main job's noise with `experiment=voice_commands data.root=...`), the
front end, the rest of the forward with the losses, backward, clipping and the configured
optimiser's step, each a median over rounds. Adam's step is timed again in its three
implementations (fused kernel, foreach, per-parameter loop). The fp32 matmul peak at one
thread and at every CPU the process may use says how fast the machine is, so that figures
from two machines compare.
"""

import dataclasses
import math
import os
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

import torch
import torch.nn.functional as F
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from torch import Tensor, nn
from torch.nn.utils.rnn import pad_sequence

from asr import CONF_DIR
from asr.audio import load_audio
from asr.augment import AugmentConfig, Augmenter
from asr.config import register_configs
from asr.data import DurationBatchSampler, collate
from asr.features import FeatureConfig, FrontEnd, padding_mask
from asr.model import ModelDimensions, SpeechTransformer, sinusoids
from asr.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer
from asr.train import clip_gradients
from benchmarks.harness import (
    alternate,
    base_parser,
    cathy,
    markdown_table,
    matmul_peak,
    median,
    report,
    require_data,
    sample,
    set_threads,
    speech_commands,
)

Batch = dict[str, Tensor]


def default_config(overrides: list[str]) -> tuple[ModelDimensions, FeatureConfig, dict]:
    """The default training config (conf/train.yaml) with Hydra-style overrides."""
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    model = OmegaConf.to_container(cfg.model, resolve=True)
    features = FeatureConfig(**OmegaConf.to_container(cfg.features, resolve=True))
    model["n_input"] = features.dim
    return model, features, OmegaConf.to_container(cfg, resolve=True)


def real_batches(root: Path, n_batches: int, batch_size: int, sample_rate: int, vocab: int,
                 seed: int, per_corpus: int = 300,
                 ) -> tuple[list[Batch], Tokenizer, list[list[tuple[Path, str]]]]:
    """`n_batches` duration-bucketed batches drawn from real words and sentences, loaded, with
    the tokenizer trained on the pool and each batch's (file, text) items."""
    require_data(root)
    pool = sample(speech_commands(root), per_corpus, seed) + sample(cathy(root), per_corpus, seed)
    tokenizer = Tokenizer.train([text for _, text in pool], vocab)
    durations = [_seconds(f) for f, _ in pool]
    batches = list(DurationBatchSampler(durations, batch_size, shuffle=True, seed=seed))
    items = [[pool[i] for i in b] for b in sample(batches, n_batches, seed)]
    return [collate_real(b, tokenizer, sample_rate) for b in items], tokenizer, items


def _seconds(path: Path) -> float:
    import soundfile as sf

    info = sf.info(str(path))
    return info.frames / info.samplerate


def collate_real(items: list[tuple[Path, str]], tokenizer: Tokenizer, sample_rate: int) -> Batch:
    waves = [load_audio(f, sample_rate) for f, _ in items]
    tokens = [torch.tensor(tokenizer.encode(t)) for _, t in items]
    return {"wave": pad_sequence(waves, batch_first=True),
            "lengths": torch.tensor([len(w) for w in waves]),
            "tokens": pad_sequence(tokens, batch_first=True, padding_value=PAD_ID)}


def decoder_io(targets: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """BOS + targets in, targets + EOS out (as SpeechTransformer.forward builds them)."""
    target_lengths = (targets != PAD_ID).sum(1)
    bos = torch.full_like(targets[:, :1], BOS_ID)
    decoder_in = torch.cat([bos, targets], dim=1)
    decoder_out = torch.cat([targets, torch.full_like(bos, PAD_ID)], dim=1)
    decoder_out[torch.arange(len(targets)), target_lengths] = EOS_ID
    return decoder_in, decoder_out, target_lengths


class PeerModel(nn.Module):
    """Our front end and heads around another library's Transformer, for an equal-size race."""

    def __init__(self, dims: ModelDimensions, features: FeatureConfig, kind: str) -> None:
        super().__init__()
        self.dims, self.kind = dims, kind
        d = dims.d_model
        self.frontend = FrontEnd(features)
        if kind == "speechbrain":
            from speechbrain.lobes.models.transformer.TransformerASR import TransformerASR

            self.core = TransformerASR(
                tgt_vocab=dims.n_vocab, input_size=dims.n_input * dims.stack, d_model=d,
                nhead=dims.n_head, num_encoder_layers=dims.n_encoder_layers,
                num_decoder_layers=dims.n_decoder_layers, d_ffn=dims.d_ff, dropout=dims.dropout,
                activation=nn.ReLU, normalize_before=dims.norm == "pre", causal=False)
            self.token_weight = self.core.custom_tgt_module.layers[0].emb.Embedding.weight
        else:
            self.embed = nn.Linear(dims.n_input * dims.stack, d)
            self.token_embedding = nn.Embedding(dims.n_vocab, d, padding_idx=PAD_ID)
            with warnings.catch_warnings():  # "nested tensors unused with norm_first": fine
                warnings.simplefilter("ignore", UserWarning)
                self.core = nn.Transformer(
                    d, dims.n_head, dims.n_encoder_layers, dims.n_decoder_layers, dims.d_ff,
                    dims.dropout, batch_first=True, norm_first=dims.norm == "pre")
            self.token_weight = self.token_embedding.weight
        self.ctc = nn.Linear(d, dims.n_vocab)

    def forward(self, wave: Tensor, lengths: Tensor, targets: Tensor) -> dict[str, Tensor]:
        feats, frames = self.frontend(wave, lengths)
        s = self.dims.stack
        x = F.pad(feats, (0, 0, 0, (-feats.shape[1]) % s)).unflatten(1, (-1, s)).flatten(2)
        memory_lengths = (frames + s - 1) // s
        decoder_in, decoder_out, target_lengths = decoder_io(targets)
        if self.kind == "speechbrain":
            memory, hidden = self.core(x, decoder_in, memory_lengths / x.shape[1], pad_idx=PAD_ID)
        else:
            memory, hidden = self._torch_transformer(x, memory_lengths, decoder_in)
        logits = hidden @ self.token_weight.T
        att = F.cross_entropy(logits.flatten(0, 1), decoder_out.flatten(), ignore_index=PAD_ID,
                              label_smoothing=self.dims.label_smoothing)
        log_probs = self.ctc(memory).log_softmax(-1).transpose(0, 1)
        ctc = F.ctc_loss(log_probs, targets, memory_lengths, target_lengths, blank=PAD_ID,
                         reduction="sum", zero_infinity=True) / target_lengths.sum().clamp(min=1)
        w = self.dims.ctc_weight
        return {"loss": (1 - w) * att + w * ctc}

    def _torch_transformer(self, x: Tensor, memory_lengths: Tensor,
                           decoder_in: Tensor) -> tuple[Tensor, Tensor]:
        d = self.dims.d_model
        src = self.embed(x) * math.sqrt(d) + sinusoids(x.shape[1], d)
        tgt = self.token_embedding(decoder_in) * math.sqrt(d) + sinusoids(decoder_in.shape[1], d)
        pad = ~padding_mask(memory_lengths, x.shape[1])
        length = decoder_in.shape[1]
        causal = torch.ones(length, length, dtype=torch.bool).triu(1)  # True: may not attend
        memory = self.core.encoder(src, src_key_padding_mask=pad)
        hidden = self.core.decoder(tgt, memory, tgt_mask=causal, memory_key_padding_mask=pad)
        return memory, hidden


def build(kind: str, dims: ModelDimensions, features: FeatureConfig, batches: list[Batch],
          seed: int) -> nn.Module:
    torch.manual_seed(seed)
    model = SpeechTransformer(dims, features) if kind == "ours" else PeerModel(dims, features, kind)
    model.frontend.set_cmvn((b["wave"], b["lengths"]) for b in batches)
    return model.train()


class Stepper:
    """forward + loss + backward + clip + Adam step over a list of batches."""

    def __init__(self, model: nn.Module, batches: list[Batch], train_cfg: dict) -> None:
        optim = {k: v for k, v in train_cfg["optim"].items() if k != "_target_"}
        self.model, self.batches = model, batches
        self.optimizer = torch.optim.Adam(model.parameters(), **optim)
        self.grad_clip = train_cfg["trainer"]["grad_clip"]
        self.losses: list[float] = []

    def step(self, batch: Batch) -> float:
        loss = self.model(batch["wave"], batch["lengths"], batch["tokens"])["loss"]
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip_gradients(self.model.parameters(), self.grad_clip)  # as asr.train does
        self.optimizer.step()
        return loss.item()

    def __call__(self) -> None:
        self.losses.append(sum(self.step(b) for b in self.batches) / len(self.batches))


def parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def contenders(dims: ModelDimensions, features: FeatureConfig, batches: list[Batch],
               seed: int) -> dict[str, nn.Module]:
    kinds = {"ours (asr.model)": "ours", "torch.nn.Transformer": "torch"}
    try:
        import speechbrain.lobes.models.transformer.TransformerASR  # noqa: F401
        kinds["SpeechBrain TransformerASR"] = "speechbrain"
    except ImportError:
        print("note: speechbrain is not installed (pip install '.[bench]'): its row is skipped")
    return {name: build(kind, dims, features, batches, seed) for name, kind in kinds.items()}


class StepParts:
    """Our training step timed part by part over a round of batches (`items`: each batch's
    files and texts), as asr.training runs it; `seconds[part]` per round."""

    def __init__(self, model: SpeechTransformer, items: list[list[tuple[Path, str]]],
                 tokenizer: Tokenizer, sample_rate: int, train_cfg: dict,
                 augmenter: Augmenter | None) -> None:
        self.model, self.items, self.tokenizer, self.augmenter = model, items, tokenizer, augmenter
        self.sample_rate = sample_rate
        self.optimizer = Stepper(model, [], train_cfg).optimizer
        self.grad_clip = train_cfg["trainer"]["grad_clip"]
        self.seconds: dict[str, list[float]] = defaultdict(list)
        self.round: dict[str, float] = defaultdict(float)
        model.frontend.register_forward_pre_hook(lambda *_: self._start("front end"))
        model.frontend.register_forward_hook(lambda *_: self._stop("front end"))

    def _start(self, part: str) -> None:
        self.round[part] -= time.perf_counter()

    def _stop(self, part: str) -> None:
        self.round[part] += time.perf_counter()

    def _timed(self, part: str, work):
        self._start(part)
        result = work()
        self._stop(part)
        return result

    def __call__(self) -> None:
        self.round = defaultdict(float)
        for batch_items in self.items:
            items = self._timed("data loading", lambda b=batch_items: [
                (load_audio(f, self.sample_rate), torch.tensor(self.tokenizer.encode(t)))
                for f, t in b])
            if self.augmenter is not None:
                items = self._timed("augmentation", lambda i=items: [
                    (self.augmenter(wave), tokens) for wave, tokens in i])
            batch = self._timed("data loading", lambda i=items: collate(i))
            loss = self._timed("forward", lambda b=batch: self.model(
                b["wave"], b["lengths"], b["tokens"])["loss"])
            self.optimizer.zero_grad(set_to_none=True)
            self._timed("backward", loss.backward)
            self._timed("gradient clipping",
                        lambda: clip_gradients(self.model.parameters(), self.grad_clip))
            self._timed("optimizer step", self.optimizer.step)
        self.round["forward"] -= self.round["front end"]  # the front end runs inside it
        for part, seconds in self.round.items():
            self.seconds[part].append(seconds)


PART_NAMES = {"data loading": "data loading (read, resample, pad)",
              "augmentation": "augmentation (data.augment)", "front end": "front end (features)",
              "forward": "forward (encoder, decoder, losses)", "backward": "backward",
              "gradient clipping": "gradient clipping", "optimizer step": "optimizer step"}
ADAM_KINDS = {"fused": {"fused": True}, "foreach": {"foreach": True},
              "per-parameter loop": {"foreach": False}}


def adam_kinds(model: nn.Module, batch: Batch, train_cfg: dict, rounds: int,
               steps: int = 20) -> dict[str, list[float]]:
    """Seconds of one Adam step (the config's hyper-parameters) over the model's parameters,
    with a real batch's gradients, in each implementation, alternating."""
    model(batch["wave"], batch["lengths"], batch["tokens"])["loss"].backward()
    settings = {k: v for k, v in train_cfg["optim"].items() if k not in ("_target_", "fused")}
    optimizers = {name: torch.optim.Adam(model.parameters(), **settings, **kind)
                  for name, kind in ADAM_KINDS.items()}
    times = alternate({name: lambda o=o: [o.step() for _ in range(steps)]
                       for name, o in optimizers.items()}, rounds)
    return {name: [t / steps for t in seconds] for name, seconds in times.items()}


def matmul_gflops(size: int, rounds: int) -> dict[str, float]:
    """fp32 matmul GFLOP/s at one thread and at every CPU this process may use."""
    call, flops = matmul_peak(size)
    peaks, threads = {}, torch.get_num_threads()
    for n in sorted({1, len(os.sched_getaffinity(0))}):
        torch.set_num_threads(n)
        peaks[f"{n} thread(s)"] = flops / median(alternate({"mm": call}, rounds)["mm"]) / 1e9
    torch.set_num_threads(threads)
    return peaks


def step_parts(dims: ModelDimensions, features: FeatureConfig, batches: list[Batch],
               items: list[list[tuple[Path, str]]], tokenizer: Tokenizer, train_cfg: dict,
               args) -> tuple[str, dict]:
    """The breakdown's tables (markdown) and figures: our step part by part, Adam's
    implementations, the machine's matmul peak."""
    augment = AugmentConfig.from_dict(train_cfg["data"].get("augment"))
    augmenter = Augmenter(augment, features.sample_rate) if augment.enabled else None
    parts = StepParts(build("ours", dims, features, batches, args.seed), items, tokenizer,
                      features.sample_rate, train_cfg, augmenter)
    for _ in range(args.rounds + 1):  # the first round warms up
        parts()
    per_step = {part: median(seconds[1:]) / len(items) for part, seconds in parts.seconds.items()}
    step = sum(per_step.values())
    rows = [[name, f"{1000 * per_step[part]:.1f}", f"{100 * per_step[part] / step:.1f}%"]
            if part in per_step else [name, "off", ""] for part, name in PART_NAMES.items()]
    rows.append(["**step**", f"**{1000 * step:.1f}**", "100%"])
    kinds = adam_kinds(build("ours", dims, features, batches, args.seed), batches[0], train_cfg,
                       args.rounds)
    adam = [[name, f"{1000 * median(seconds):.2f}", f"{100 * median(seconds) / step:.1f}%"]
            for name, seconds in kinds.items()]
    peaks = matmul_gflops(args.peak_size, args.rounds)
    table = "\n\n".join([
        markdown_table(["part of our step", "ms per step", "share"], rows),
        markdown_table(["Adam implementation", "ms per step", "share of the step"], adam),
        markdown_table([f"fp32 matmul peak ({args.peak_size}^2)", "GFLOP/s"],
                       [[n, f"{v:.1f}"] for n, v in peaks.items()])])
    return table, {"parts_seconds_per_step": per_step, "step_seconds": step,
                   "augmentation": augment.enabled,
                   "adam_seconds_per_step": {n: median(s) for n, s in kinds.items()},
                   "matmul_gflops": peaks}


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=6, help="batches per round")
    parser.add_argument("--batch-size", type=int, help="utterances per batch (config default)")
    parser.add_argument("--pool", type=int, default=300, help="utterances drawn per corpus")
    parser.add_argument("--peak-size", type=int, default=2048, help="matmul side for the peak")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. model=tiny")
    args = parser.parse_args(argv)
    set_threads(args.threads)
    model_cfg, features, train_cfg = default_config(args.overrides)
    batch_size = args.batch_size or train_cfg["data"]["batch_size"]
    batches, tokenizer, items = real_batches(
        args.data, args.batches, batch_size, features.sample_rate,
        train_cfg["tokenizer"]["vocab_size"], args.seed, args.pool)
    dims = ModelDimensions(**{**model_cfg, "n_vocab": tokenizer.vocab_size})
    raced = dataclasses.replace(dims, subsampling="stack")
    if dims.subsampling != "stack":
        print(f"note: the race gives all three the stacked front end (stack {dims.stack}); "
              f"the config's {dims.subsampling} front end is in our step's parts")
    models = contenders(raced, features, batches, args.seed)
    steppers = {name: Stepper(m, batches, train_cfg) for name, m in models.items()}
    times = alternate(steppers, args.rounds)
    audio = sum(b["lengths"].sum().item() for b in batches) / features.sample_rate
    ours = median(times["ours (asr.model)"])
    rows, results = [], {}
    for name, seconds in times.items():
        t = median(seconds)
        results[name] = {"parameters": parameters(models[name]), "round_seconds": seconds,
                         "steps_per_s": len(batches) / t, "audio_s_per_s": audio / t,
                         "ours_speedup": t / ours, "mean_loss_per_round": steppers[name].losses}
        rows.append([name, f"{parameters(models[name]):,}", len(batches) / t, audio / t,
                     f"{t / ours:.2f}x"])
    table = markdown_table(["model", "parameters", "steps/s", "audio s/s",
                            "ours is faster by"], rows)
    shape = (f"d_model {dims.d_model}, {dims.n_head} heads, {dims.n_encoder_layers}+"
             f"{dims.n_decoder_layers} layers, ffn {dims.d_ff}, vocab {dims.n_vocab}, "
             f"{len(batches)} batches of <= {batch_size} ({audio:.1f} s of audio per round)")
    parts_table, parts = step_parts(dims, features, batches, items, tokenizer, train_cfg, args)
    print(shape)
    report(f"Training throughput ({args.threads} thread(s), median of {args.rounds} rounds)",
           f"{table}\n\n{parts_table}",
           {"config": {"model": model_cfg, "batches": len(batches), "batch_size": batch_size,
                       "audio_seconds_per_round": audio, "shape": shape}, "models": results,
            **parts}, args.json)


if __name__ == "__main__":
    sys.exit(main())
