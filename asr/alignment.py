"""Word timings: a transcript forced-aligned to the audio by the model's CTC head.

The CTC head scores every encoder frame against every token. torchaudio's `forced_align`
finds the single path through the frames that emits exactly the transcript's tokens (blanks
between them) with the highest probability; each token then owns the frames of its run on
that path. A word is the run of its BPE pieces: sentencepiece marks a word's first piece
with WORD_START. `align_words` works in encoder frames (`asr.transcriber` turns them into
seconds); `align_text` times the words of any text in a waveform, in seconds. CTC's peaky
outputs make a word's span start late and end early rather than cover the whole word.
"""

from dataclasses import dataclass

import torch
import torchaudio.functional as AF
from torch import Tensor

from asr.model import SpeechTransformer
from asr.network import Network, as_network
from asr.tokenizer import PAD_ID, WORD_START, Tokenizer


@dataclass(frozen=True)
class WordFrames:
    """One word of an aligned transcript: its token ids and frames [start, end)."""

    ids: list[int]
    start: int
    end: int
    probability: float  # mean over its tokens of their mean CTC probability on their frames


def align_words(log_probs: Tensor, ids: list[int], pieces: list[str]) -> list[WordFrames] | None:
    """Align one utterance's token `ids` to its CTC `log_probs` (frames, vocab), blank =
    PAD_ID; `pieces` are the tokenizer's pieces. None when the tokens cannot fit into the
    frames (CTC needs a frame per token, and a blank between two equal tokens)."""
    if not ids:
        return []
    repeats = sum(a == b for a, b in zip(ids, ids[1:], strict=False))
    if len(ids) + repeats > len(log_probs):
        return None
    targets = torch.tensor([ids], dtype=torch.int32, device=log_probs.device)
    labels, scores = AF.forced_align(log_probs[None].float(), targets, blank=PAD_ID)
    spans = AF.merge_tokens(labels[0], scores[0].exp(), blank=PAD_ID)
    firsts = [i for i, token in enumerate(ids) if i == 0 or pieces[token].startswith(WORD_START)]
    words = []
    for first, end in zip(firsts, firsts[1:] + [len(ids)], strict=True):
        part = spans[first:end]
        words.append(WordFrames(ids[first:end], part[0].start, part[-1].end,
                                sum(span.score for span in part) / len(part)))
    return words


@dataclass(frozen=True)
class WordTime:
    word: str
    start: float  # seconds from the waveform's start
    end: float


@torch.no_grad()
def align_text(model: "SpeechTransformer | Network", tokenizer: Tokenizer, wave: Tensor,
               text: str) -> list[WordTime]:
    """Each word of `text` (as the tokenizer spells it) with its time in `wave`; [] when the
    text is empty or cannot fit into the audio. `model`: the torch model or any
    `asr.network.Network` (its ONNX export)."""
    network = as_network(model)
    if not network.has_ctc:
        raise ValueError("word times need a CTC head (model.ctc_weight > 0)")
    device = network.device
    memory, lengths = network.encode(wave[None].to(device),
                                     torch.tensor([len(wave)], device=device))
    log_probs = network.ctc_logits(memory).float().log_softmax(-1)[0, :int(lengths[0])].cpu()
    words = align_words(log_probs, tokenizer.encode(text), tokenizer.pieces) or []
    step = network.frame_seconds
    return [WordTime(tokenizer.decode(w.ids), w.start * step, w.end * step) for w in words]
