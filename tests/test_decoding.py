"""Search: the cache changes nothing, batched equals one at a time, beam finds at least greedy's
score, CTC prefix scores are exact CTC probabilities, length and loops are bounded."""

import math

import pytest
import torch
import torch.nn.functional as F

from asr.checkpoint import load_model_dir
from asr.decoding import DecodingOptions, ctc_greedy, decode
from asr.search import CTCPrefixScorer, RepetitionLimit, WordList
from asr.tokenizer import BOS_ID, EOS_ID, PAD_ID
from asr.transcriber import Transcriber
from test_model import make_model, waves

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]


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


@pytest.mark.parametrize("ctc_weight", [0.0, 0.4])
def test_batched_search_equals_one_at_a_time(ctc_weight):
    model = peaked_model()
    batch, lengths = waves(0.3, 0.9, 0.6)
    for beam in (1, 4):
        options = DecodingOptions(beam_size=beam, max_len_ratio=0.5, ctc_weight=ctc_weight,
                                  encoder_batch=2)  # encoded in chunks, searched together
        together = decode(model, batch, lengths, options)
        alone = [decode(model, batch[i:i + 1, : lengths[i]], lengths[i:i + 1], options)[0]
                 for i in range(3)]
        assert together == alone
        assert any(len(ids) > 2 for ids in together)


def test_lead_in_puts_silence_before_each_utterance():
    """decode.lead_in_ms = the same search on waveforms that start with that much silence."""
    model = peaked_model()
    batch, lengths = waves(0.3, 0.6)
    options = DecodingOptions(beam_size=3, max_len_ratio=0.5, lead_in_ms=100)
    padded = torch.cat([torch.zeros(2, 1600), batch], dim=1)  # 100 ms at 16 kHz
    expected = decode(model, padded, lengths + 1600, DecodingOptions(beam_size=3, max_len_ratio=0.5))
    assert decode(model, batch, lengths, options) == expected
    assert expected != decode(model, batch, lengths, DecodingOptions(beam_size=3, max_len_ratio=0.5))
    with pytest.raises(ValueError, match=r"lead_in_ms must be in \[0, 5000\]"):
        DecodingOptions(lead_in_ms=-5)


def test_cache_gives_the_same_hypotheses_on_a_trained_model(overfit_model):
    """Greedy and beam, attention-only and joint: with and without the key/value cache."""
    model_dir, entries, _ = overfit_model
    model, tokenizer, _ = load_model_dir(model_dir)
    loader = Transcriber(model, tokenizer)
    wave_list = [loader.load(path) for path, _ in entries]
    wave = torch.nn.utils.rnn.pad_sequence(wave_list, batch_first=True)
    lengths = torch.tensor([len(w) for w in wave_list])
    texts = [t for _, t in entries]
    for beam in (1, 4):
        for ctc_weight in (0.0, 0.5):
            options = {"beam_size": beam, "ctc_weight": ctc_weight}
            cached = decode(model, wave, lengths, DecodingOptions(kv_cache=True, **options))
            full = decode(model, wave, lengths, DecodingOptions(kv_cache=False, **options))
            assert cached == full
            assert [tokenizer.decode(ids) for ids in cached] == texts


@pytest.mark.parametrize("pos", ["sinusoidal", "rope", "relative", "sinusoidal+rope"])
def test_cached_decoder_logits_match_the_full_pass(pos):
    """With every position encoding: the cache places new tokens at their true offset."""
    model = make_model(pos=pos)
    from asr.attention import DecoderCache
    memory, lengths = model.encode(*waves(0.5, 0.8))
    tokens = torch.tensor([[BOS_ID, 10, 11, 12, 13], [BOS_ID, 7, 7, 30, 4]])
    full = model.decoder(tokens, memory, lengths)
    cache = DecoderCache(len(model.decoder.blocks))
    steps = [model.decoder(tokens[:, :2], memory, lengths, cache)]  # a prompt, then one by one
    steps += [model.decoder(tokens[:, i:i + 1], memory, lengths, cache) for i in range(2, 5)]
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)
    # The encoder's keys/values were projected once and kept; the tokens' grew step by step.
    assert all(c.k is not None and c.k.shape[2] == memory.shape[1] for c in cache.cross_attn)
    assert all(c.k.shape[2] == 5 for c in cache.self_attn)


def test_beam_finds_at_least_the_greedy_score():
    model = peaked_model()
    batch, lengths = waves(0.4, 0.7, 1.0)
    greedy = decode(model, batch, lengths, DecodingOptions(beam_size=1, max_len_ratio=0.5))
    beam = decode(model, batch, lengths, DecodingOptions(beam_size=5, length_penalty=0.0,
                                                         max_len_ratio=0.5))
    for i in range(3):
        assert log_prob(model, batch[i], lengths[i], beam[i]) >= \
            log_prob(model, batch[i], lengths[i], greedy[i]) - 1e-5


@pytest.mark.parametrize("ctc_weight", [0.0, 0.5])
def test_output_length_is_bounded_by_encoder_length(ctc_weight):
    model = make_model()
    batch, lengths = waves(0.2, 0.5)
    _, memory_lengths = model.encode(batch, lengths)
    for beam in (1, 3):
        out = decode(model, batch, lengths, DecodingOptions(
            beam_size=beam, max_len_ratio=0.25, ctc_weight=ctc_weight, max_repeats=0))
        for ids, frames in zip(out, memory_lengths.tolist(), strict=True):
            assert len(ids) <= -(-frames // 4)


def test_ctc_prefix_scores_of_full_sequences_equal_ctc_loss():
    """Extending hypotheses token by token and ending them gives exactly log P_ctc(y), the
    forward score F.ctc_loss computes; for repeats, padded frames, and the empty one."""
    model = make_model()
    memory, lengths = model.encode(*waves(0.3, 0.9, 0.6, 0.5))
    logits = model.ctc(memory)
    hyps = [[5, 6, 6, 7], [9, 9, 9, 12, 4, 9], [4, 4, 8], []]
    scorer = CTCPrefixScorer(logits, lengths, group=1)
    final = [0.0] * len(hyps)
    for step in range(max(map(len, hyps)) + 1):
        candidates = torch.tensor([[h[step] if step < len(h) else EOS_ID, 20] for h in hyps])
        scores = scorer.score(candidates)
        for n, h in enumerate(hyps):
            if step == len(h):
                final[n] = scores[n, 0].item()
        scorer.select(torch.arange(len(hyps)), torch.zeros(len(hyps), dtype=torch.long))
    log_probs = logits.float().log_softmax(-1).transpose(0, 1)
    targets = torch.tensor([h + [PAD_ID] * (6 - len(h)) for h in hyps])
    expected = -F.ctc_loss(log_probs, targets, lengths, torch.tensor([len(h) for h in hyps]),
                           blank=PAD_ID, reduction="none")
    assert final == pytest.approx(expected.tolist(), abs=1e-4)


def test_ctc_prefix_scores_fall_as_prefixes_grow():
    """P(output starts with g + c) <= P(output starts with g): joint scores only fall."""
    model = make_model()
    memory, lengths = model.encode(*waves(0.6))
    scorer = CTCPrefixScorer(model.ctc(memory), lengths, group=1)
    previous = 0.0
    for token in [5, 9, 9, 30]:
        score = scorer.score(torch.tensor([[token]]))[0, 0].item()
        assert score <= previous + 1e-6
        scorer.select(torch.tensor([0]), torch.tensor([0]))
        previous = score


def test_ctc_greedy_merges_repeats_and_drops_blanks():
    logits = torch.full((2, 7, 10), -5.0)
    paths = [[0, 5, 5, 0, 5, 6, 6], [7, 7, 7, 0, 0, 0, 8]]
    for b, path in enumerate(paths):
        logits[b, torch.arange(7), torch.tensor(path)] = 5.0
    assert ctc_greedy(logits, torch.tensor([7, 5])) == [[5, 5, 6], [7]]


def test_repetition_limit_forbids_only_the_looping_token():
    """At most three copies of a token sequence back to back: the token that would start
    a fourth is forbidden, nothing else."""
    tokens = torch.tensor([[BOS_ID, 5, 6, 5, 6, 5, 6, 5],      # "6" would complete a 4th "5 6"
                           [BOS_ID, 5, 6, 5, 6, 5, 7, 5],      # no loop
                           [BOS_ID, 4, 9, 4, 9, 8, 8, 8],      # a 4th "8"
                           [BOS_ID, 10, 11, 12, 13, 4, 8, 8]])  # a 3rd "8" is fine
    log_probs = torch.zeros(4, 20)
    RepetitionLimit(max_repeats=3).apply(log_probs, tokens)
    assert (log_probs == -math.inf).nonzero().tolist() == [[0, 6], [2, 8]]


def test_word_list_allows_only_pieces_that_spell_listed_words():
    """After each prefix, exactly the pieces that keep the last word a prefix of "two" or
    "three", a new word only after a complete one, and EOS only then (or before any word)."""
    pieces = ["<pad>", "<unk>", "<s>", "</s>", "\u2581", "\u2581t", "wo", "o", "\u2581th",
              "ree", "e", "t", "h", "r", "w"]
    word_list = WordList(["Two", "three"], pieces)

    def allowed(ids: list[int]) -> list[str]:
        log_probs = torch.zeros(1, len(pieces))
        word_list.apply(log_probs, torch.tensor([[BOS_ID, *ids]]))
        return [p for p, score in zip(pieces, log_probs[0].tolist(), strict=True) if score == 0]

    anywhere = ["</s>", "\u2581", "\u2581t", "\u2581th"]
    assert allowed([]) == anywhere
    assert allowed([5]) == ["wo", "h", "w"]            # "t" -> two, three
    assert allowed([5, 6]) == anywhere                 # "two" is complete
    assert allowed([4]) == ["t"]                       # a word begun with a bare mark
    assert allowed([8, 9]) == anywhere                 # "three"
    assert allowed([8, 13]) == ["e"]                   # "thr" -> three only
    assert allowed([5, 6, 8, 13, 10]) == ["e"]         # "two thre"


def test_word_list_decoding_writes_only_listed_words(overfit_model):
    """The eight memorised utterances, decoded with a list of all their words, come out as
    without it; with a list that lacks most of them, every word written is a listed one."""
    model_dir, entries, _ = overfit_model
    transcriber = Transcriber.from_pretrained(model_dir, device="cpu", vad=None)
    paths, texts = [p for p, _ in entries], [t for _, t in entries]
    for beam in (1, 4):
        full = Transcriber.from_pretrained(model_dir, device="cpu", vad=None, beam_size=beam,
                                           words=texts)
        assert [r.text for r in full.transcribe(paths)] == texts
        few = Transcriber.from_pretrained(model_dir, device="cpu", vad=None, beam_size=beam,
                                          words=["one", "stop"])
        written = " ".join(r.text for r in few.transcribe(paths)).split()
        assert written and set(written) <= {"one", "stop"}
    assert [r.text for r in transcriber.transcribe(paths)] == texts


def test_options_are_checked():
    with pytest.raises(ValueError, match="decode.mode must be one of"):
        DecodingOptions(mode="ctc")
    with pytest.raises(ValueError, match=r"decode.ctc_weight must be in \[0, 1\)"):
        DecodingOptions(ctc_weight=1.0)
    with pytest.raises(ValueError, match="^decode.words must name at least one word$"):
        DecodingOptions(words=["", "?!"])
    with pytest.raises(ValueError, match="^decode.words constrains the attention search, not "
                                         "decode.mode=ctc_greedy$"):
        DecodingOptions(mode="ctc_greedy", words=["one"])
    for name in ("grammar", "lm"):  # `--grammar ''`, or `grammar: ""` in a model's config
        with pytest.raises(ValueError, match=f"^decode.{name} is an empty file name \\(null: none\\)$"):
            DecodingOptions(**{name: " "})


def test_the_exact_beam_stop_waits_for_a_longer_hypothesis_that_can_still_win():
    """A finished 2-token hypothesis scoring -2 (normalised -1) against a live 3-token prefix
    at -2.5: unnormalised the live one is behind, so the heuristic stops; normalised over the
    10 tokens it may still reach (-0.25) it can win, so the exact stop goes on."""
    from asr.search import _Finished

    heuristic, exact = _Finished(), _Finished(limit=10, length_penalty=1.0)
    for finished in (heuristic, exact):
        finished.add(-2.0, [5, 6], 2)
        finished.update(-2.5, beam=1)
    assert heuristic.done and not exact.done
    exact.update(-20.0, beam=1)  # -20 / 10 = -2 < -1: nothing live can win any more
    assert exact.done
