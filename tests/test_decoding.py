"""Search: batched equals one at a time, beam finds at least greedy's score, length is bounded."""

import pytest
import torch
import torch.nn.functional as F

from asr.decoding import DecodingOptions, beam_search, ctc_rescore, decode
from asr.tokenizer import BOS_ID, EOS_ID
from test_model import make_model, waves


def log_prob(model, wave, length, ids: list[int]) -> float:
    memory, lengths = model.encode(wave[None, :length], length[None])
    scores = model.decoder(torch.tensor([[BOS_ID, *ids]]), memory, lengths).log_softmax(-1)[0]
    return sum(scores[i, t].item() for i, t in enumerate([*ids, EOS_ID]))


def peaked_model():
    """A random model whose output layer is sharpened, so hypotheses end at varied lengths."""
    model = make_model()
    with torch.no_grad():
        model.decoder.token_embedding.weight.mul_(4.0)
    return model


def test_batched_search_equals_one_at_a_time():
    model = peaked_model()
    batch, lengths = waves(0.3, 0.9, 0.6)
    for beam in (1, 4):
        options = DecodingOptions(beam_size=beam, max_len_ratio=0.5)
        together = decode(model, batch, lengths, options)
        alone = [decode(model, batch[i:i + 1, : lengths[i]], lengths[i:i + 1], options)[0]
                 for i in range(3)]
        assert together == alone


def test_beam_finds_at_least_the_greedy_score():
    model = peaked_model()
    batch, lengths = waves(0.4, 0.7, 1.0)
    greedy = decode(model, batch, lengths, DecodingOptions(beam_size=1, max_len_ratio=0.5))
    beam = decode(model, batch, lengths, DecodingOptions(beam_size=5, length_penalty=0.0,
                                                         max_len_ratio=0.5))
    for i in range(3):
        assert log_prob(model, batch[i], lengths[i], beam[i]) >= \
            log_prob(model, batch[i], lengths[i], greedy[i]) - 1e-5


def test_output_length_is_bounded_by_encoder_length():
    model = make_model()
    batch, lengths = waves(0.2, 0.5)
    _, memory_lengths = model.encode(batch, lengths)
    for beam in (1, 3):
        out = decode(model, batch, lengths, DecodingOptions(beam_size=beam, max_len_ratio=0.25))
        for ids, frames in zip(out, memory_lengths.tolist(), strict=True):
            assert len(ids) <= -(-frames // 4)


def ctc_log_prob(model, memory, frames: int, ids: list[int]) -> float:
    """CTC forward score of one hypothesis on its own (no padding, no batching)."""
    log_probs = model.ctc(memory[:1, :frames]).log_softmax(-1).transpose(0, 1)
    target = torch.tensor([ids or [0]])
    return -F.ctc_loss(log_probs, target, torch.tensor([frames]), torch.tensor([len(ids)]),
                       blank=0, reduction="sum").item()


def test_ctc_rescoring_picks_by_the_joint_score():
    """With weight 1 and no length penalty the pick is the n-best entry CTC scores highest;
    with weight 0 it is plain beam search's pick."""
    model = peaked_model()
    batch, lengths = waves(0.6, 1.0)
    memory, memory_lengths = model.encode(batch, lengths)
    max_tokens = torch.tensor([6, 6])
    options = DecodingOptions(beam_size=4, length_penalty=0.0, ctc_weight=1.0)
    finished = beam_search(model, memory, memory_lengths, max_tokens, options)
    picked = ctc_rescore(model, memory, memory_lengths, finished, options)
    for b, done in enumerate(finished):
        assert len({tuple(h[2]) for h in done.hypotheses}) > 1  # a real choice
        frames = int(memory_lengths[b])
        scores = {tuple(h[2]): ctc_log_prob(model, memory[b:b + 1], frames, h[2])
                  for h in done.hypotheses}
        assert scores[tuple(picked[b])] == pytest.approx(max(scores.values()), abs=1e-4)
    plain = DecodingOptions(beam_size=4, length_penalty=0.0, ctc_weight=0.0)
    assert ctc_rescore(model, memory, memory_lengths, finished, plain) == \
        [f.best() for f in finished]
