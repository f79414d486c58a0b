"""Search for the most likely transcript (after openai/whisper's `decoding.py`, ESPnet's beam search).

`DecodingTask` is one way of decoding, built once (whisper's `DecodingTask`): the network, the
options, the tokenizer's pieces, the loaded language model and the grammar. Its two methods
decode a padded batch of waveforms: `run` to the best token ids, `hypotheses` to each
transcript with its scores. The decoding path is three modules more:

- `asr.search`: what to do (`DecodingOptions`, `conf/decode/*.yaml` fill it), the searches
  (`GreedySearch`, `BeamSearch`: every hypothesis of every utterance in one decoder call per
  step, through one `Scorer`: decoder, shallow fusion with a token LM (`asr/lm.py`), logit
  filters, the CTC prefix score), and the filters: suppressed tokens, repetition loops, with
  `words` a closed vocabulary, with a grammar only its sentences (`asr.grammar`, as Vosk's or
  pocketsphinx's grammar argument). The longest transcript allowed is tied to the encoder
  length.
- `asr.network`: what the search asks of a trained model (`Network`: encode, CTC logits,
  decoder steps), so that the same search runs the torch model (`TorchNetwork`) or its
  exported ONNX graphs (`asr.onnx_backend.OnnxNetwork`); next-token log-probabilities with a
  key/value cache (`asr.attention`'s caches) or without (`CachedInference`, `FullInference`).
- `asr.utterances`: long inputs cut into utterances and batched by length.

Three things are called grammar on this path: the grammar file (`DecodingOptions.grammar`, a
Rhino context YAML), the `asr.grammar.Grammar` read from it (its sentences, intents and
slots), and the `TokenGrammar` (that grammar's automaton over the tokenizer's pieces: which
token may come next), which the search follows.

Here also:

- `ctc_greedy`: the CTC head's best path alone, the fast path (no decoder at all). It also
  guards the decoder: an utterance whose best CTC path is empty (every frame blank) has no
  words, whatever the attention decoder, which must say something, would invent.
- `teacher_forced` (average log-probability, no-speech probability, confidence) and
  `garbage_ratio` (a grammar sentence's likelihood ratio against the free best path): the
  scores of what was found.

The CTC head's logits are computed once per batch and serve every step that reads them: the
no-speech guard, the prefix score, the scores and the word alignment.
"""

import math
import warnings
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor

from asr.alignment import WordFrames, align_words
from asr.grammar import Grammar
from asr.grammar.automaton import TokenGrammar
from asr.lm import TokenLM, load_lm
from asr.model import SpeechTransformer
from asr.network import Network, as_network
from asr.search import BeamSearch, DecodingOptions, GreedySearch, Ranked, Scorer
from asr.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer


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
    free_tokens: list[int] | None = None  # with a grammar, when asked: the free transcript


class DecodingTask:
    """One way of decoding, built once: the network, the options, the tokenizer's pieces, the
    loaded language model (`options.lm`, or `lm`) and the grammar (a loaded `Grammar`, or the
    file `options.grammar` names) with its `TokenGrammar`.

    The tokenizer is needed for a word list, a grammar, a language model and word alignment;
    plain search needs only the network. Everything the options name is loaded here, so a bad
    file fails at construction, not at the first utterance.
    """

    def __init__(self, model: SpeechTransformer | Network, options: DecodingOptions | None = None,
                 tokenizer: Tokenizer | None = None, grammar: Grammar | None = None,
                 lm: TokenLM | None = None) -> None:
        self.network = as_network(model)
        self.options = options = options or DecodingOptions()
        self.pieces = tokenizer.pieces if tokenizer is not None else None
        if grammar is None and options.grammar is not None:
            grammar = Grammar.load(options.grammar)
        if grammar is not None and (options.mode == "ctc_greedy" or options.words is not None):
            raise ValueError("a grammar constrains the attention search: not with "
                             "decode.mode=ctc_greedy nor decode.words")
        if lm is None and options.lm is not None:
            lm = load_lm(options.lm, self._tokenizer(tokenizer, "decode.lm"), self.network.device)
        if options.words is not None:
            self._tokenizer(tokenizer, "decode.words")
        self.grammar = grammar
        self.token_grammar = None if grammar is None else TokenGrammar(
            grammar.automaton, self._tokenizer(tokenizer, "a grammar").pieces)
        if self.token_grammar is not None and (unwritable := self.token_grammar.unwritable()):
            more = f" and {len(unwritable) - 5} more" if len(unwritable) > 5 else ""
            warnings.warn(f"{grammar.source}: this model cannot write "
                          f"{', '.join(map(repr, unwritable[:5]))}{more} (letters its tokenizer "
                          "lacks): no sentence holding them can be recognised", stacklevel=2)
        self.lm = lm
        # With a grammar, the search the model makes without it (its language model fused):
        # what was heard, against which the grammar's sentence is checked.
        self.free = None if grammar is None else DecodingTask(
            self.network, replace(options, grammar=None), tokenizer, None, lm)

    @staticmethod
    def _tokenizer(tokenizer: Tokenizer | None, needs: str) -> Tokenizer:
        if tokenizer is None:
            raise ValueError(f"{needs} needs the tokenizer")
        return tokenizer

    @torch.no_grad()
    def run(self, wave: Tensor, lengths: Tensor) -> list[list[int]]:
        """Token ids (no BOS/EOS) of the best transcript of each waveform of a padded batch."""
        memory, memory_lengths = self.encode(wave, lengths)
        return self.best(memory, memory_lengths, self.ctc_logits(memory))

    def best(self, memory: Tensor, memory_lengths: Tensor, logits: Tensor | None
             ) -> list[list[int]]:
        """Each utterance's best transcript's ids (empty: none) given the memory, its lengths
        and its CTC logits."""
        return [best[0][0] if best else [] for best in self.search(memory, memory_lengths, logits)]

    @torch.no_grad()
    def hypotheses(self, wave: Tensor, lengths: Tensor, align: bool = False,
                   free: bool = False) -> list[Hypothesis]:
        """`run`, each transcript with its scores and, with `align` (needs the CTC head and
        the tokenizer), its words' encoder frames (lead-in included). With a grammar, each
        also carries its n-best list and its `garbage_ratio`, and with `free` the free
        transcript: what the same search writes without the grammar, on the same encoder
        states (a grammar sentence unlike it was forced onto speech that says something else)."""
        memory, memory_lengths = self.encode(wave, lengths)
        logits = self.ctc_logits(memory)
        ranked = self.search(memory, memory_lengths, logits)
        found = [best[0][0] if best else [] for best in ranked]
        log_probs = None if logits is None else logits.float().log_softmax(-1)
        average, no_speech, confidence = teacher_forced(self.network, memory, memory_lengths,
                                                        found, ctc_log_probs=log_probs)
        rows = [{} for _ in found]
        if self.token_grammar is not None:
            ratios = garbage_ratio(self.network, memory, memory_lengths, found, log_probs)
            heard = self.free.best(memory, memory_lengths, logits) \
                if free and self.free is not None else None
            for row, (best, ratio) in enumerate(zip(ranked, ratios, strict=True)):
                rows[row] = {"nbest": best, "garbage_ratio": ratio,
                             "free_tokens": heard[row] if heard is not None else None}
        if align:
            if log_probs is None or self.pieces is None:
                raise ValueError("word alignment needs a model with a CTC head and the "
                                 "tokenizer")
            for row, (ids, n) in enumerate(zip(found, memory_lengths, strict=True)):
                rows[row]["words"] = align_words(log_probs[row, :int(n)], ids, self.pieces)
        return [Hypothesis(tokens=ids, avg_logprob=avg, no_speech_prob=empty, confidence=sure,
                           **extra)
                for ids, avg, empty, sure, extra
                in zip(found, average, no_speech, confidence, rows, strict=True)]

    def encode(self, wave: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Encoder states of a padded batch, `options.lead_in_ms` of silence before each
        waveform: a model that heard a pause before the first word in training (synthetic
        speech, most recordings) mishears clips that start right on it (FSDD's)."""
        if self.options.lead_in_ms > 0:
            samples = round(self.options.lead_in_ms / 1000 * self.network.sample_rate)
            wave, lengths = F.pad(wave, (samples, 0)), lengths + samples
        return encode(self.network, wave, lengths, self.options.encoder_batch)

    def ctc_logits(self, memory: Tensor) -> Tensor | None:
        """The CTC head's logits of a batch (None without a head), once for every step that
        reads them."""
        return self.network.ctc_logits(memory) if self.network.has_ctc else None

    def search(self, memory: Tensor, memory_lengths: Tensor,
               logits: Tensor | None) -> list[Ranked]:
        """Each utterance's transcripts found, (ids, score) best first (empty: none), given
        the memory, its lengths and its CTC logits."""
        options = self.options
        if options.mode == "ctc_greedy":
            if logits is None:
                raise ValueError("decode.mode=ctc_greedy needs a model with a CTC head")
            return [[(ids, 0.0)] for ids in ctc_greedy(logits.float(), memory_lengths)]
        if options.ctc_no_speech and logits is not None:
            speech = [bool(ids) for ids in ctc_greedy(logits.float(), memory_lengths)]
            if not all(speech):
                return _only(speech, lambda keep: self._search(
                    memory[keep], memory_lengths[keep], logits[keep]))
        return self._search(memory, memory_lengths, logits)

    def _search(self, memory: Tensor, memory_lengths: Tensor,
                logits: Tensor | None) -> list[Ranked]:
        options = self.options
        max_tokens = (memory_lengths.float() * options.max_len_ratio).ceil().long().clamp(min=1)
        search = GreedySearch() if options.beam_size == 1 else BeamSearch(
            options.beam_size, options.length_penalty, exact=self.token_grammar is not None)
        scorer = Scorer(self, memory, memory_lengths, logits, search.group)
        return search.run(scorer, max_tokens)


@torch.no_grad()
def decode(model: SpeechTransformer | Network, wave: Tensor, lengths: Tensor,
           options: DecodingOptions | None = None,
           tokenizer: Tokenizer | None = None) -> list[list[int]]:
    """Token ids of the best transcript of each waveform of a padded batch: a `DecodingTask`
    built for this one call (build the task once to decode many batches)."""
    return DecodingTask(model, options, tokenizer).run(wave, lengths)


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
