"""Search for the most likely transcript (after openai/whisper's `decoding.py`, ESPnet's beam search).

The entry points and the scores of what was found live here; the decoding path is three
modules more:

- `asr.search`: what to do (`DecodingOptions`, `conf/decode/*.yaml` fill it), the searches
  (`GreedySearch`, `BeamSearch`: every hypothesis of every utterance in one decoder call per
  step, through one `Scorer`: decoder, shallow fusion with a token LM (`asr/lm.py`), logit
  filters, the CTC prefix score), and the filters: suppressed tokens, repetition loops, with
  `words` a closed vocabulary, with `grammar` a task grammar (only its sentences may be
  written, `asr.grammar`, as Vosk's or pocketsphinx's grammar argument). The longest
  transcript allowed is tied to the encoder length.
- `asr.network`: what the search asks of a trained model (`Network`: encode, CTC logits,
  decoder steps), so that the same search runs the torch model (`TorchNetwork`) or its
  exported ONNX graphs (`asr.onnx_backend.OnnxNetwork`); next-token log-probabilities with a
  key/value cache (`asr.attention`'s caches) or without (`CachedInference`, `FullInference`).
- `asr.utterances`: long inputs cut into utterances and batched by length.

Here:

- `ctc_greedy`: the CTC head's best path alone, the fast path (no decoder at all). It also
  guards the decoder: an utterance whose best CTC path is empty (every frame blank) has no
  words, whatever the attention decoder, which must say something, would invent.
- `decode_hypotheses`: each transcript found with its scores (`teacher_forced`: average
  log-probability, no-speech probability, confidence), with a grammar its n-best list and
  its likelihood ratio against the free best path (`garbage_ratio`) and, if asked, its words'
  frames (`asr.alignment`, CTC forced alignment). `decode_texts`: plain texts of a batch.
"""

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor

from asr.alignment import WordFrames, align_words
from asr.grammar.automaton import TokenGrammar
from asr.lm import TokenLM
from asr.model import SpeechTransformer
from asr.network import Network, as_network
from asr.search import BeamSearch, DecodingOptions, GreedySearch, Ranked, Scorer
from asr.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer


@torch.no_grad()
def decode(model: SpeechTransformer | Network, wave: Tensor, lengths: Tensor,
           options: DecodingOptions, pieces: list[str] | None = None,
           lm: TokenLM | None = None, grammar: TokenGrammar | None = None) -> list[list[int]]:
    """Token ids (no BOS/EOS) of the best transcript of each waveform in the batch.

    `pieces` (the tokenizer's piece of each id) are needed only for `options.words`, `lm` (the
    loaded `options.lm`) only for fusion, `grammar` (the loaded `options.grammar`) only for a
    grammar search. `options.lead_in_ms` of silence go before each waveform: a model that
    heard a pause before the first word in training (synthetic speech, most recordings)
    mishears clips that start right on it (FSDD's).
    """
    network = as_network(model)
    memory, memory_lengths = encode(network, *_lead_in(network, wave, lengths, options),
                                    options.encoder_batch)
    return decode_memory(network, memory, memory_lengths, options, pieces, lm, grammar)


def decode_texts(model: SpeechTransformer | Network, tokenizer: Tokenizer, wave: Tensor,
                 lengths: Tensor, options: DecodingOptions, lm: TokenLM | None = None,
                 grammar: TokenGrammar | None = None) -> list[str]:
    """One padded batch of waveforms -> transcripts (`decode`, then the tokenizer)."""
    pieces = tokenizer.pieces if options.words is not None else None
    found = decode(model, wave, lengths, options, pieces, lm, grammar)
    return [tokenizer.decode(ids) for ids in found]


@dataclass
class Hypothesis:
    """A transcript found for one utterance, and how the model rates it."""

    tokens: list[int]  # token ids, no BOS/EOS
    avg_logprob: float  # attention decoder's log P per token, EOS included (teacher forced)
    no_speech_prob: float  # attention decoder's P(EOS) as the first token: an empty transcript
    confidence: float  # `teacher_forced`: attention and CTC together, in (0, 1]
    words: list[WordFrames] | None = None  # CTC forced alignment, when asked for and possible
    nbest: Ranked | None = None  # with a grammar: its sentences found, (ids, score) best first
    garbage_ratio: float | None = None  # with a grammar: `garbage_ratio` of `tokens`
    free_tokens: list[int] | None = None  # with a grammar: the CTC head's best path, free


@torch.no_grad()
def decode_hypotheses(model: SpeechTransformer | Network, wave: Tensor, lengths: Tensor,
                      options: DecodingOptions, pieces: list[str] | None = None,
                      lm: TokenLM | None = None, align: bool = False,
                      grammar: TokenGrammar | None = None) -> list[Hypothesis]:
    """`decode`, each transcript with its scores and, with `align` (needs the CTC head and
    `pieces`), its words' encoder frames (lead-in included). With a `grammar`, each also
    carries its n-best list and its `garbage_ratio`."""
    network = as_network(model)
    memory, memory_lengths = encode(network, *_lead_in(network, wave, lengths, options),
                                    options.encoder_batch)
    ranked = search_memory(network, memory, memory_lengths, options, pieces, lm, grammar)
    found = [best[0][0] if best else [] for best in ranked]
    # the CTC head's log-probabilities, once for every score below that reads them
    log_probs = network.ctc_logits(memory).float().log_softmax(-1) if network.has_ctc else None
    scores = teacher_forced(network, memory, memory_lengths, found, ctc_log_probs=log_probs)
    ratios: list[float | None] = [None] * len(found)
    free: list[list[int] | None] = [None] * len(found)
    if grammar is not None:
        ratios = garbage_ratio(network, memory, memory_lengths, found, log_probs)
        if log_probs is not None:
            free = ctc_greedy(log_probs, memory_lengths)
    words: list[list[WordFrames] | None] = [None] * len(found)
    if align:
        if log_probs is None or pieces is None:
            raise ValueError("word alignment needs a model with a CTC head and the tokenizer's "
                             "pieces")
        words = [align_words(log_probs[row, :int(n)], ids, pieces)
                 for row, (ids, n) in enumerate(zip(found, memory_lengths, strict=True))]
    nbest = ranked if grammar is not None else [None] * len(found)
    return [Hypothesis(ids, att, no_speech, sure, timing, best, ratio, heard)
            for ids, att, no_speech, sure, timing, best, ratio, heard
            in zip(found, *scores, words, nbest, ratios, free, strict=True)]


@torch.no_grad()
def garbage_ratio(network: Network, memory: Tensor, memory_lengths: Tensor,
                  found: list[list[int]], log_probs: Tensor | None = None) -> list[float]:
    """How much better the free best path explains the audio than each transcript, per
    encoder frame: (log P(best CTC path) - log P_ctc(transcript)) / frames, in nats.

    The free path is the CTC head's best path (the most likely token on every frame): the
    "garbage model" of keyword spotting, which may say anything. A transcript the audio really
    says scores about as well (a ratio near 0); a grammar sentence forced onto other speech
    leaves many frames unexplained (a large ratio). Infinite for an empty transcript or one
    the frames cannot fit; 0 for a model without a CTC head (no free path to compare with).
    `log_probs`: the CTC head's log-probabilities of `memory`, when already at hand.
    """
    if not network.has_ctc:
        return [0.0] * len(found)
    if log_probs is None:
        log_probs = network.ctc_logits(memory).float().log_softmax(-1)
    frames = torch.arange(log_probs.shape[1], device=memory.device)[None] < memory_lengths[:, None]
    best = (log_probs.amax(-1) * frames).sum(1)
    path = _ctc_nll(log_probs, memory_lengths, *_padded_ids(found, memory.device))
    # P_ctc sums over every alignment, so it may beat the best single path a little: that is
    # a ratio of 0, the transcript explains the audio as well as anything could
    ratio = ((best + path) / memory_lengths.clamp(min=1)).clamp(min=0.0)
    return [r if ids else math.inf for r, ids in zip(ratio.tolist(), found, strict=True)]


def _lead_in(network: Network, wave: Tensor, lengths: Tensor,
             options: DecodingOptions) -> tuple[Tensor, Tensor]:
    if options.lead_in_ms <= 0:
        return wave, lengths
    samples = round(options.lead_in_ms / 1000 * network.sample_rate)
    return F.pad(wave, (samples, 0)), lengths + samples


@torch.no_grad()
def teacher_forced(model: SpeechTransformer | Network, memory: Tensor, memory_lengths: Tensor,
                   found: list[list[int]], ctc_weight: float = 0.5,
                   ctc_log_probs: Tensor | None = None,
                   ) -> tuple[list[float], list[float], list[float]]:
    """Each transcript's `Hypothesis` scores: average log-probability per token (EOS
    included) from the attention decoder, the decoder's probability of an empty transcript
    (EOS first, as whisper's no-speech token: training pairs noise with empty transcripts),
    and the `confidence`.

    Confidence is how well the audio supports a transcript, in (0, 1]: exp of its per-token
    log-probability, (1 - w) from the attention decoder and w from the CTC head (the whole
    transcript against every frame). The attention decoder alone is a fluent language model
    over the training sentences and is sure of an in-grammar sentence whatever was said; CTC
    has to account for every frame of the audio, so speech that is not the transcript lowers
    the score. `ctc_log_probs`: the CTC head's log-probabilities of `memory`, when at hand.
    """
    network = as_network(model)
    tokens, lengths = _padded_ids(found, memory.device)
    inputs = torch.cat([torch.full_like(tokens[:, :1], BOS_ID), tokens[:, :-1]], dim=1)
    targets = tokens.clone()
    targets[torch.arange(len(found)), lengths] = EOS_ID
    log_probs = network.logits(inputs, memory, memory_lengths).float().log_softmax(-1)
    picked = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    attention = (picked * (targets != PAD_ID)).sum(1) / (lengths + 1)
    score = attention
    if network.has_ctc:
        if ctc_log_probs is None:
            ctc_log_probs = network.ctc_logits(memory).float().log_softmax(-1)
        path = _ctc_nll(ctc_log_probs, memory_lengths, tokens, lengths)
        score = (1 - ctc_weight) * attention - ctc_weight * path / (lengths + 1)
    return attention.tolist(), log_probs[:, 0, EOS_ID].exp().tolist(), score.exp().tolist()


def _padded_ids(found: list[list[int]], device: torch.device) -> tuple[Tensor, Tensor]:
    """Transcripts as one (n, longest + 1) tensor padded with PAD_ID (room for EOS), and
    their lengths."""
    lengths = torch.tensor([len(ids) for ids in found], device=device)
    tokens = torch.full((len(found), int(lengths.max()) + 1), PAD_ID, dtype=torch.long,
                        device=device)
    for row, ids in enumerate(found):
        tokens[row, :len(ids)] = torch.tensor(ids, dtype=torch.long)
    return tokens, lengths


def _ctc_nll(log_probs: Tensor, memory_lengths: Tensor, tokens: Tensor,
             lengths: Tensor) -> Tensor:
    """-log P_ctc of each padded transcript (`_padded_ids`) given the CTC log-probabilities
    (batch, frames, vocab); inf where it cannot fit into the frames."""
    targets = tokens[:, :-1] if tokens.shape[1] > 1 else tokens
    return F.ctc_loss(log_probs.transpose(0, 1), targets, memory_lengths, lengths, blank=PAD_ID,
                      reduction="none")


def encode(model: SpeechTransformer | Network, wave: Tensor, lengths: Tensor,
           chunk: int) -> tuple[Tensor, Tensor]:
    """Encoder states of a batch, computed `chunk` utterances at a time, each chunk cut to its
    longest utterance: on a CPU, a large batch encoded at once costs more per utterance than a
    chunk whose activations fit the caches. The search then runs on the whole batch, where
    batching pays."""
    network = as_network(model)
    if len(wave) <= chunk:
        return network.encode(wave, lengths)
    parts = [network.encode(wave[i:i + chunk, :int(lengths[i:i + chunk].max())],
                          lengths[i:i + chunk]) for i in range(0, len(wave), chunk)]
    frames = max(m.shape[1] for m, _ in parts)
    memory = torch.cat([F.pad(m, (0, 0, 0, frames - m.shape[1])) for m, _ in parts])
    return memory, torch.cat([n for _, n in parts])


def decode_memory(model: SpeechTransformer | Network, memory: Tensor, memory_lengths: Tensor,
                  options: DecodingOptions, pieces: list[str] | None = None,
                  lm: TokenLM | None = None, grammar: TokenGrammar | None = None,
                  ) -> list[list[int]]:
    """The best transcript's ids given the memory (`encode`'s, (batch, frames, ...)) and its
    lengths."""
    ranked = search_memory(model, memory, memory_lengths, options, pieces, lm, grammar)
    return [best[0][0] if best else [] for best in ranked]


def search_memory(model: SpeechTransformer | Network, memory: Tensor, memory_lengths: Tensor,
                  options: DecodingOptions, pieces: list[str] | None = None,
                  lm: TokenLM | None = None, grammar: TokenGrammar | None = None,
                  ) -> list[Ranked]:
    """Each utterance's transcripts found, (ids, score) best first (empty: none)."""
    network = as_network(model)
    if options.mode == "ctc_greedy":
        if not network.has_ctc:
            raise ValueError("decode.mode=ctc_greedy needs a model with a CTC head")
        return [[(ids, 0.0)] for ids in ctc_greedy(network.ctc_logits(memory).float(),
                                                   memory_lengths)]
    if options.ctc_no_speech and network.has_ctc:
        speech = [bool(ids) for ids in ctc_greedy(network.ctc_logits(memory).float(),
                                                  memory_lengths)]
        if not all(speech):
            return _only(speech, lambda keep: search_memory(
                network, memory[keep], memory_lengths[keep], replace(options, ctc_no_speech=False),
                pieces, lm, grammar))
    max_tokens = (memory_lengths.float() * options.max_len_ratio).ceil().long().clamp(min=1)
    search = GreedySearch() if options.beam_size == 1 else BeamSearch(
        options.beam_size, options.length_penalty, exact=grammar is not None)
    scorer = Scorer(network, memory, memory_lengths, search.group, options, pieces, lm, grammar)
    return search.run(scorer, max_tokens)


def _only(keep: list[bool], run) -> list[Ranked]:
    """`run(indices)` on the kept utterances only; the others find nothing (an empty list
    without a grammar: one empty transcript)."""
    indices = [i for i, k in enumerate(keep) if k]
    found = iter(run(torch.tensor(indices, dtype=torch.long)) if indices else [])
    return [next(found) if k else [([], 0.0)] for k in keep]


def ctc_greedy(logits: Tensor, lengths: Tensor) -> list[list[int]]:
    """Best CTC path per utterance: most likely token per frame, repeats merged, blanks dropped."""
    best = logits.argmax(-1)
    out = []
    for row, n in zip(best.tolist(), lengths.tolist(), strict=True):
        path = row[:n]
        out.append([t for i, t in enumerate(path) if t != PAD_ID and (i == 0 or t != path[i - 1])
                    and t not in (BOS_ID, EOS_ID)])
    return out
