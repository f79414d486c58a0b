"""The training techniques as model options: norm x pos x attention build, learn and keep contracts."""

import importlib.util
import itertools
import json
import math
import subprocess
import sys

import pytest
import torch
from torch import nn

from asr.attention import MultiHeadAttention
from asr.audio import load_audio
from asr.features import FeatureConfig
from asr.guided_attention import guided_attention_loss
from asr.model import ModelDimensions, SpeechTransformer
from asr.tokenizer import BOS_ID, Tokenizer
from helpers import ROOT, small_real_set, train_config, write_manifest

pytestmark = [pytest.mark.tier("slow"), pytest.mark.data]

OPTIONS = list(itertools.product(["pre", "post", "tfixup"], ["sinusoidal", "relative", "rope"],
                                 ["full", "local"]))


def tiny(**options) -> SpeechTransformer:
    torch.manual_seed(0)
    dims = ModelDimensions(n_vocab=40, n_input=80, d_model=32, n_head=4, d_ff=64,
                           n_encoder_layers=2, n_decoder_layers=2, dropout=0.0,
                           max_relative_distance=4, attention_window=3, **options)
    return SpeechTransformer(dims, FeatureConfig())


@pytest.fixture(scope="module")
def real_batch() -> dict[str, torch.Tensor]:
    """Four real utterances (digits and command words) with their BPE targets."""
    entries = small_real_set()[2:6]
    tokenizer = Tokenizer.train([text for _, text in small_real_set()], 40)
    waves = [load_audio(path, 16000) for path, _ in entries]
    targets = [torch.tensor(tokenizer.encode(text)) for _, text in entries]
    return {"wave": nn.utils.rnn.pad_sequence(waves, batch_first=True),
            "lengths": torch.tensor([len(w) for w in waves]),
            "tokens": nn.utils.rnn.pad_sequence(targets, batch_first=True)}


@pytest.mark.parametrize(("norm", "pos", "attention"), OPTIONS)
def test_each_option_learns_real_audio(real_batch, norm, pos, attention):
    """Builds, runs forward and backward with finite gradients, and a few steps lower the loss."""
    model = tiny(norm=norm, pos=pos, attention=attention)
    model.frontend.set_cmvn([(real_batch["wave"], real_batch["lengths"])])  # as training does:
    model.train()  # without LayerNorm, T-Fixup needs normalised inputs
    assert any(isinstance(m, nn.LayerNorm) for m in model.modules()) == (norm != "tfixup")
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    losses = []
    for _ in range(8):
        loss = model(real_batch["wave"], real_batch["lengths"], real_batch["tokens"])["loss"]
        optimizer.zero_grad()
        loss.backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses


def test_guided_attention_charges_mass_off_the_diagonal():
    diagonal = torch.eye(4)[None, None]  # token n on frame n: on the diagonal, free
    lengths = torch.tensor([4])
    assert guided_attention_loss(diagonal, lengths, lengths, 0.2).item() == pytest.approx(0.0)
    reverse = diagonal.flip(2)  # token n on frame 3 - n: n/N - t/T = -0.75, -0.25, 0.25, 0.75

    def cost(distance: float) -> float:
        return 1 - math.exp(-(distance**2) / (2 * 0.2**2))

    expected = (2 * cost(0.75) + 2 * cost(0.25)) / 4
    assert guided_attention_loss(reverse, lengths, lengths, 0.2).item() == pytest.approx(expected)
    padded = torch.zeros(2, 3, 6, 9)  # a second utterance and padding change nothing
    padded[0, :, :4, :4] = reverse[0, 0]
    padded[1, :, :2, :5] = torch.eye(2, 5)  # 2 tokens on frames 0 and 1 of 5
    second = cost(0.5 / 2 - 0.5 / 5) + cost(1.5 / 2 - 1.5 / 5)
    both = guided_attention_loss(padded, torch.tensor([4, 2]), torch.tensor([4, 5]), 0.2)
    assert both.item() == pytest.approx((4 * expected + second) / 6)


def test_guided_attention_trains_towards_the_diagonal(real_batch):
    """The loss is reported, has gradients, and falls with the attention loss (weighted
    heavily, so that in 8 steps its fall is not within its noise)."""
    model = tiny(pos="rope", guided_attention=20.0)
    model.frontend.set_cmvn([(real_batch["wave"], real_batch["lengths"])])
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    history = []
    for _ in range(8):
        losses = model(real_batch["wave"], real_batch["lengths"], real_batch["tokens"])
        optimizer.zero_grad()
        losses["loss"].backward()
        optimizer.step()
        history.append((losses["loss"].item(), losses["guide"].item()))
    assert history[-1][0] < 0.8 * history[0][0] and history[-1][1] < history[0][1], history
    assert "guide" not in model.eval()(real_batch["wave"], real_batch["lengths"],
                                       real_batch["tokens"])


@pytest.mark.parametrize("pos", ["relative", "rope"])
def test_positions_in_attention_keep_the_decoder_causal(pos):
    model = tiny(pos=pos).eval()
    memory, lengths = model.encode(torch.randn(1, 8000) * 0.1, torch.tensor([8000]))
    tokens = torch.tensor([[BOS_ID, 10, 11, 12, 13]])
    changed = tokens.clone()
    changed[0, 3:] = torch.tensor([30, 31])
    a, b = model.decoder(tokens, memory, lengths), model.decoder(changed, memory, lengths)
    assert a.shape == (1, 5, 40)
    assert torch.allclose(a[:, :3], b[:, :3], atol=1e-6)
    assert not torch.allclose(a[:, 3:], b[:, 3:])


@pytest.mark.parametrize("pos", [None, "relative", "rope"])
def test_explicit_positions_let_new_queries_use_earlier_keys(pos):
    """A KV cache's contract: the last token alone, at its true position, against all keys
    (the earlier ones projected before), equals the last row of running the whole sequence."""
    torch.manual_seed(0)
    attn = MultiHeadAttention(32, 4, pos, max_distance=3).eval()
    x = torch.randn(2, 7, 32)
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    whole = attn(x, x, causal)
    assert whole.shape == x.shape
    positions = torch.arange(7)
    k_old, v_old = attn.project(x[:, :6], positions[:6])  # an earlier step, cached
    k_new, v_new = attn.project(x[:, 6:], positions[6:])
    k, v = torch.cat([k_old, k_new], 2), torch.cat([v_old, v_new], 2)
    q = attn.queries(x[:, 6:], positions[6:])
    last = attn.out(attn.attend(q, k, v, None, positions[6:], positions).transpose(1, 2).flatten(2))
    assert torch.allclose(last, whole[:, 6:], atol=1e-5)


@pytest.mark.parametrize("pos", [None, "relative", "rope"])
def test_local_attention_is_full_attention_within_its_window(pos):
    torch.manual_seed(0)
    full = MultiHeadAttention(32, 4, pos, max_distance=5)
    x = torch.randn(2, 23, 32)
    lengths = torch.tensor([23, 14])
    padding = (torch.arange(23)[None] < lengths[:, None])[:, None, None, :]
    for window in (22, 40, 4, 1):
        local = MultiHeadAttention(32, 4, pos, max_distance=5, window=window)
        local.load_state_dict(full.state_dict())
        band = (torch.arange(23)[None] - torch.arange(23)[:, None]).abs() <= window
        expected, got = full(x, x, padding & band), local(x, x, padding)
        assert torch.allclose(got[0], expected[0], atol=1e-5)
        assert torch.allclose(got[1, :14], expected[1, :14], atol=1e-5)  # padding is ignored


def test_tfixup_scales_its_xavier_init_by_depth():
    model = tiny(norm="tfixup")
    block = model.encoder.blocks[0]
    xavier = (6 / (32 + 64)) ** 0.5
    scale = 0.67 * 2**-0.25
    assert 0.9 * xavier * scale < block.mlp[0].weight.abs().max() <= xavier * scale
    square = (6 / 64) ** 0.5  # each packed projection is initialised as its own 32 x 32 layer
    for weights, value_scale in ((block.attn.projection_weights(), scale),
                                 (model.decoder.blocks[1].cross_attn.projection_weights(),
                                  18**-0.25)):
        assert 0.9 * square < weights["query"].abs().max() <= square
        assert 0.9 * square * value_scale < weights["value"].abs().max() <= square * value_scale
    assert model.decoder.token_embedding.weight.std().item() == pytest.approx(32**-0.5 * 18**-0.25,
                                                                       rel=0.15)


@pytest.mark.parametrize(("option", "message"), [
    ({"norm": "rms"}, "model.norm must be pre, post or tfixup, got 'rms'"),
    ({"pos": "alibi"}, "model.pos must be sinusoidal, relative, rope, sinusoidal\\+relative or "
                        "sinusoidal\\+rope, got 'alibi'"),
    ({"attention": "sparse"}, "model.attention must be full or local, got 'sparse'"),
    ({"attention": "local", "attention_window": 0}, "model.attention_window must be >= 1"),
])
def test_bad_options_are_one_clear_line(option, message):
    with pytest.raises(ValueError, match=message):
        ModelDimensions(n_vocab=10, **option)


@pytest.mark.subprocess
@pytest.mark.train
def test_training_logs_a_loss_curve_and_fills_cosine_length(tmp_path):
    """trainer.log_every points reach metrics.json; cosine learns its length; report reads it."""
    from asr.train import Trainer

    manifest = write_manifest(tmp_path / "train.jsonl", small_real_set()[:4])
    cfg = train_config(tmp_path, manifest, "tokenizer.vocab_size=30", "data.batch_size=2",
                       "scheduler=cosine", "scheduler.warmup_steps=1", "trainer.max_epochs=2",
                       "trainer.log_every=2", "model.norm=tfixup", "model.pos=rope")
    trainer = Trainer(cfg)
    assert cfg.scheduler.total_steps == 2 * len(trainer.train_loader) == 4
    trainer.fit()
    metrics = json.loads((tmp_path / "model" / "metrics.json").read_text())
    assert [p["step"] for p in metrics["loss_curve"]] == [2, 4]
    runs = tmp_path / "ablation" / "runs"
    runs.mkdir(parents=True)
    (tmp_path / "model").rename(runs / "0")
    done = subprocess.run([sys.executable, "-m", "recipes.ablation.report", str(runs.parent)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "| warmup_cosine (warmup 1) | tfixup | rope | 4 |" in done.stdout
    assert (runs.parent / "loss_curves.png").read_bytes()[:4] == b"\x89PNG"


def load_plots():
    spec = importlib.util.spec_from_file_location("plots", ROOT / "tools" / "plots.py")
    plots = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plots)
    return plots


def test_plots_of_schedules_and_positions(tmp_path):
    plots = load_plots()
    plots.plot_lr(tmp_path / "lr.png")
    plots.plot_posenc(tmp_path / "posenc.png")
    for name in ("lr.png", "posenc.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


def test_monotonicity_of_attention_maps():
    monotonicity = load_plots().monotonicity
    diagonal = torch.eye(5, 8)
    assert monotonicity(diagonal) == pytest.approx(1.0)
    assert monotonicity(diagonal.flip(0)) == pytest.approx(-1.0)
    assert monotonicity(torch.full((5, 8), 1 / 8)) == pytest.approx(0.0, abs=1e-6)
    assert monotonicity(torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])) \
        == pytest.approx(0.5)
    assert monotonicity(torch.ones(1, 4)) == 0.0


def test_attention_figure_of_a_trained_model(overfit_model, tmp_path, capsys):
    model_dir, entries, _ = overfit_model
    load_plots().plot_attention(model_dir, entries[0][0], tmp_path / "attention.png")
    assert (tmp_path / "attention.png").read_bytes()[:4] == b"\x89PNG"
    printed = capsys.readouterr().out
    assert printed.count("monotonicity") == 2  # tiny: 1 decoder layer x 2 heads


@pytest.mark.parametrize(("norm", "pos", "attention"), [("tfixup", "relative", "local"),
                                                        ("pre", "rope", "local"),
                                                        ("post", "relative", "full")])
def test_padding_does_not_change_outputs(norm, pos, attention):
    """An utterance scores the same alone or padded inside a longer batch, whatever the option."""
    model = tiny(norm=norm, pos=pos, attention=attention).eval()
    torch.manual_seed(1)
    batch = torch.randn(2, 16000) * 0.1
    batch[0, 5920:] = 0
    lengths = torch.tensor([5920, 16000])
    tokens = torch.tensor([[BOS_ID, 5, 6, 7]] * 2)
    memory, memory_lengths = model.encode(batch, lengths)
    alone_memory, alone_lengths = model.encode(batch[:1, :5920], lengths[:1])
    n = alone_lengths.item()
    assert torch.allclose(memory[0, :n], alone_memory[0], atol=1e-5)
    together = model.decoder(tokens, memory, memory_lengths)
    assert torch.allclose(together[0], model.decoder(tokens[:1], alone_memory, alone_lengths)[0],
                          atol=1e-5)


@pytest.mark.parametrize(("pos", "absolute", "inside"), [
    ("sinusoidal", True, None), ("rope", False, "rope"), ("relative", False, "relative"),
    ("sinusoidal+rope", True, "rope"), ("sinusoidal+relative", True, "relative")])
def test_absolute_and_attention_positions_combine(pos, absolute, inside):
    model = tiny(pos=pos)
    assert (model.dims.absolute_pos, model.dims.attention_pos) == (absolute, inside)
    assert model.decoder.absolute == absolute
    for block in [*model.encoder.blocks, *model.decoder.blocks]:
        assert (block.attn.rotary is not None) == (inside == "rope")
        assert (block.attn.relative is not None) == (inside == "relative")
