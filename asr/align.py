"""Word times from the CTC head: where in an utterance each word of its transcript was said.

The transcript's tokens are force-aligned to the CTC head's log-probabilities over encoder
positions (`torchaudio.functional.forced_align`: the Viterbi path through the CTC lattice that
spells exactly those tokens); a word spans its first token's first position to its last
token's last one. An encoder position stands for `position_seconds` of audio (4 or
`model.stack` feature frames), so times are as fine as that (40-60 ms); CTC's peaky outputs make
a word's span start late and end early rather than cover the whole word.
"""

from dataclasses import dataclass

import torch
import torchaudio.functional as AF

from asr.model import SpeechTransformer
from asr.tokenizer import PAD_ID, Tokenizer

WORD_START = "\u2581"  # sentencepiece's mark of a word's first piece


@dataclass
class WordTime:
    word: str
    start: float  # seconds from the utterance's start
    end: float


def position_seconds(model: SpeechTransformer) -> float:
    """Audio per encoder position: feature hop x frames per position."""
    frames = 4 if model.dims.subsampling == "conv2d" else model.encoder.stride
    return model.frontend.cfg.hop_ms / 1000 * frames


@torch.no_grad()
def align_words(model: SpeechTransformer, tokenizer: Tokenizer, wave: torch.Tensor,
                text: str) -> list[WordTime]:
    """Each word of `text` (normalised as the tokenizer spells it) with its time in `wave`."""
    if model.ctc is None:
        raise ValueError("word times need a CTC head (model.ctc_weight > 0)")
    ids = tokenizer.encode(text)
    if not ids:
        return []
    device = next(model.parameters()).device
    memory, lengths = model.encode(wave[None].to(device), torch.tensor([len(wave)], device=device))
    log_probs = model.ctc(memory).float().log_softmax(-1)[:, :int(lengths[0])].cpu()
    if log_probs.shape[1] < len(ids):  # too short to spell them: a position per token at least
        return []
    path, scores = AF.forced_align(log_probs, torch.tensor([ids]), blank=PAD_ID)
    spans = AF.merge_tokens(path[0], scores[0].exp(), blank=PAD_ID)
    step = position_seconds(model)
    offset = model.frontend.cfg.n_fft / model.frontend.cfg.sample_rate / 2  # first frame's centre
    pieces = tokenizer.pieces
    words: list[WordTime] = []
    for token_id, span in zip(ids, spans, strict=True):
        piece = pieces[token_id]
        start, end = offset + span.start * step, offset + span.end * step
        if piece.startswith(WORD_START) or not words:
            words.append(WordTime(piece.removeprefix(WORD_START), start, end))
        else:
            words[-1] = WordTime(words[-1].word + piece, words[-1].start, end)
    return [w for w in words if w.word]
