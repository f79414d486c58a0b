"""Model invariants: causal decoder masks, padding-independence, options that build and run."""

import pytest
import torch
import torch.nn.functional as F

from asr.attention import MultiHeadAttention
from asr.features import FeatureConfig
from asr.model import ModelDimensions, SpeechTransformer
from asr.positions import Rotary
from asr.tokenizer import BOS_ID

pytestmark = pytest.mark.tier("fast")


def make_model(**options) -> SpeechTransformer:
    torch.manual_seed(0)
    dims = ModelDimensions(n_vocab=50, n_input=80, d_model=32, n_head=4, d_ff=64,
                           n_encoder_layers=2, n_decoder_layers=2, dropout=0.0, **options)
    return SpeechTransformer(dims, FeatureConfig()).eval()


def waves(*seconds: float) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    lengths = torch.tensor([int(s * 16000) for s in seconds])
    batch = torch.randn(len(seconds), int(lengths.max())) * 0.1
    batch *= (torch.arange(batch.shape[1])[None] < lengths[:, None])
    return batch, lengths


def test_decoder_is_causal():
    """Changing a later token never changes the scores at earlier positions."""
    model = make_model()
    memory, lengths = model.encode(*waves(0.5))
    tokens = torch.tensor([[BOS_ID, 10, 11, 12, 13]])
    changed = tokens.clone()
    changed[0, 3:] = torch.tensor([40, 41])
    a = model.decoder(tokens, memory, lengths)
    b = model.decoder(changed, memory, lengths)
    assert torch.allclose(a[:, :3], b[:, :3], atol=1e-6)
    assert not torch.allclose(a[:, 3:], b[:, 3:])


@pytest.mark.parametrize("options", [{}, {"subsampling": "conv2d"}, {"subsampling": "none"},
                                     {"norm": "post"}, {"stack": 3}])
def test_padding_does_not_change_outputs(options):
    """An utterance decodes to the same scores alone or padded inside a longer batch."""
    model = make_model(**options)
    batch, lengths = waves(0.37, 1.0)
    tokens = torch.tensor([[BOS_ID, 5, 6, 7]] * 2)
    memory, memory_lengths = model.encode(batch, lengths)
    together = model.decoder(tokens, memory, memory_lengths)
    alone_memory, alone_lengths = model.encode(batch[:1, : lengths[0]], lengths[:1])
    alone = model.decoder(tokens[:1], alone_memory, alone_lengths)
    n = alone_lengths.item()
    assert memory_lengths[0] == n
    assert torch.allclose(memory[0, :n], alone_memory[0], atol=1e-5)
    assert torch.allclose(together[0], alone[0], atol=1e-5)


@pytest.mark.parametrize("options", [{}, {"subsampling": "conv2d"}, {"ctc_weight": 0.0}])
def test_loss_is_finite_and_backpropagates(options):
    model = make_model(**options).train()
    batch, lengths = waves(0.5, 0.8)
    targets = torch.tensor([[5, 6, 7], [8, 9, 0]])
    losses = model(batch, lengths, targets)
    assert set(losses) == ({"att", "ctc", "loss"} if model.ctc else {"att", "loss"})
    losses["loss"].backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_output_layer_is_tied_to_token_embedding():
    model = make_model()
    names = [n for n, _ in model.named_parameters()]
    assert not any("proj" in n or "lm_head" in n for n in names)
    emb = model.decoder.token_embedding.weight
    memory, lengths = model.encode(*waves(0.3))
    with torch.no_grad():
        emb[7].zero_()  # a zero embedding row gives a zero logit for that token
    logits = model.decoder(torch.tensor([[BOS_ID]]), memory, lengths)
    assert logits[0, 0, 7].item() == 0.0


def test_unknown_subsampling_is_a_clear_error():
    with pytest.raises(ValueError, match="model.subsampling must be stack, conv2d or none"):
        make_model(subsampling="conv1d")


def test_batch_of_empty_transcripts_trains():
    """Silence clips have empty text: a batch of only those still gives finite losses."""
    model = make_model().train()
    wave, lengths = waves(0.5, 0.4)
    losses = model(wave, lengths, torch.zeros(2, 0, dtype=torch.long))
    assert all(torch.isfinite(v) for v in losses.values())
    losses["loss"].backward()


@pytest.mark.parametrize("pos, cross", [(None, False), ("rope", False), (None, True)])
@pytest.mark.parametrize("queries, keys", [(7, 7), (5, 12), (20, 70), (90, 90)])
def test_attention_equals_the_textbook_formula(pos, cross, queries, keys):
    """Attention computes softmax(q k^T / sqrt(d)) v of the projected (and, for RoPE, rotated)
    q, k, v, gradients too, for self-attention (queries == keys) and attention to another
    sequence, with short and long key sequences and padded keys, in both packed layouts (one
    q, k, v projection; a query and a key-value projection)."""
    torch.manual_seed(0)
    attn = MultiHeadAttention(32, 4, pos, cross=cross)
    x = torch.randn(3, max(queries, keys), 32, requires_grad=True)
    key_mask = (torch.arange(keys)[None, :] < torch.tensor([keys, keys - 3, 2])[:, None])
    mask = key_mask[:, None, None, :]
    source = x[:, :keys] if queries != keys else x
    weights = attn.projection_weights()
    biases = dict(zip(("query", "key", "value"), attn.qkv.bias.split(32) if not cross
                      else (attn.query.bias, *attn.kv.bias.split(32)), strict=True))

    def projected(name: str, t: torch.Tensor) -> torch.Tensor:
        return F.linear(t, weights[name], biases[name]).unflatten(-1, (4, 8)).transpose(1, 2)

    q, k, v = (projected("query", x[:, :queries]), projected("key", source),
               projected("value", source))
    if pos == "rope":
        q, k = attn.rotary(q, torch.arange(queries)), attn.rotary(k, torch.arange(keys))
    expected = attn.out(F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                        .transpose(1, 2).flatten(2))
    got = attn(x[:, :queries] if queries != keys else x, source, mask)
    assert torch.allclose(got, expected, atol=1e-5)
    grad_expected, = torch.autograd.grad(expected.square().sum(), x)
    grad_got, = torch.autograd.grad(got.square().sum(), x)
    assert torch.allclose(grad_got, grad_expected, atol=1e-4)


def test_rotary_turns_pairs_by_position_angles():
    """RoPE on (x_2i, x_2i+1) at position p: the pair rotated by p * 10000^(-2i/d)."""
    x = torch.randn(2, 5, 8)
    positions = torch.tensor([0, 1, 2, 7, 30])
    got = Rotary(8)(x, positions)
    angle = positions[:, None].float() * 10000.0 ** (-torch.arange(0, 8, 2).float() / 8)
    even, odd = x[..., 0::2], x[..., 1::2]
    assert torch.allclose(got[..., 0::2], even * angle.cos() - odd * angle.sin(), atol=1e-6)
    assert torch.allclose(got[..., 1::2], even * angle.sin() + odd * angle.cos(), atol=1e-6)
