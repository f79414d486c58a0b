"""The token language model: exact with its cache, learns from text, and in shallow fusion
moves the search towards what it has read; bad inputs are one-line errors."""

import math
import os
import shutil

import pytest
import torch
from omegaconf import OmegaConf

from asr.checkpoint import ModelDirError, load_model_dir
from asr.decoding import DecodingOptions, decode
from asr.lm import LM_FOLDER, LMDimensions, TokenLM, load_lm
from asr.tokenizer import BOS_ID, Tokenizer
from asr.train_lm import main as train_lm
from asr.transcriber import Transcriber

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]


def test_cached_lm_logits_match_the_full_pass():
    torch.manual_seed(0)
    lm = TokenLM(LMDimensions(n_vocab=40, d_model=32, n_head=2, d_ff=64, n_layers=2)).eval()
    tokens = torch.tensor([[BOS_ID, 10, 11, 12, 13], [BOS_ID, 7, 7, 30, 4]])
    cache = lm.new_cache()
    steps = [lm(tokens[:, :2], cache)] + [lm(tokens[:, i:i + 1], cache) for i in range(2, 5)]
    assert torch.allclose(torch.cat(steps, dim=1), lm(tokens), atol=1e-5)


def small_lm(model_dir, text, out, *extra: str) -> int:
    return train_lm(["--model", str(model_dir), "--text", str(text), "--dev", str(text),
                     "--out", str(out), "--steps", "60", "--warmup-steps", "5",
                     "--eval-every", "20", "--d-model", "32", "--layers", "1", "--d-ff", "64",
                     "--batch-tokens", "256", "--threads", "1", *extra])


@pytest.fixture(scope="module")
def one_lm(overfit_model, tmp_path_factory):
    """An LM that has read nothing but "one" (the overfit model's tokenizer)."""
    model_dir, _, _ = overfit_model
    tmp = tmp_path_factory.mktemp("lm")
    text = tmp / "one.txt"
    text.write_text("one\n" * 200)
    assert small_lm(model_dir, text, tmp / "lm") == 0
    return tmp / "lm"


def test_lm_learns_its_text(overfit_model, one_lm):
    _, tokenizer, _ = load_model_dir(overfit_model[0])
    saved = torch.load(one_lm / "lm.pt", weights_only=True)
    # Uniform guessing costs log(vocab) nats a piece; "one" is learnt to near certainty.
    assert saved["metrics"]["dev_loss"] < 0.2 * math.log(tokenizer.vocab_size)


def test_fusion_moves_the_search_towards_the_lm(overfit_model, one_lm):
    """Weight 0 changes nothing; a heavy weight makes every utterance "one"; the cache is
    exact with the LM too."""
    model_dir, entries, _ = overfit_model
    paths, texts = [p for p, _ in entries], [t for _, t in entries]
    for beam in (1, 4):
        plain = Transcriber.from_pretrained(model_dir, device="cpu", vad=None, beam_size=beam,
                                            lm=str(one_lm), lm_weight=0.0)
        assert [r.text for r in plain.transcribe(paths)] == texts
        heavy = Transcriber.from_pretrained(model_dir, device="cpu", vad=None, beam_size=beam,
                                            ctc_weight=0.0, lm=str(one_lm), lm_weight=20.0)
        assert [r.text for r in heavy.transcribe(paths)] == ["one"] * len(paths)
    model, tokenizer, _ = load_model_dir(model_dir)
    waves = [Transcriber(model, tokenizer).load(p) for p in paths]
    wave = torch.nn.utils.rnn.pad_sequence(waves, batch_first=True)
    lengths = torch.tensor([len(w) for w in waves])
    options = {"beam_size": 4, "ctc_weight": 0.5, "lm": str(one_lm), "lm_weight": 1.0}
    assert (decode(model, wave, lengths, DecodingOptions(kv_cache=True, **options), tokenizer)
            == decode(model, wave, lengths, DecodingOptions(kv_cache=False, **options), tokenizer))


def own_lm_copy(model_dir, lm_dir, out, **decode):
    """A copy of `model_dir` holding `lm_dir` as its own language model (config decode.lm)."""
    shutil.copytree(model_dir, out)
    shutil.copytree(lm_dir, out / LM_FOLDER)
    config = OmegaConf.load(out / "config.yaml")
    config.decode.lm = LM_FOLDER
    for key, value in decode.items():
        config.decode[key] = value
    OmegaConf.save(config, out / "config.yaml")
    return out


def test_a_model_directory_fuses_its_own_lm_into_free_search_only(overfit_model, one_lm,
                                                                   tmp_path, monkeypatch):
    """decode.lm in a model's config names a folder inside it, wherever the model is read
    from; a grammar's search and CTC alone decode without it, and an lm given at load time
    wins. With a grammar it is fused into the free transcript the sentence is checked
    against."""
    model_dir, entries, _ = overfit_model
    paths, texts = [p for p, _ in entries], [t for _, t in entries]
    moved = own_lm_copy(model_dir, one_lm, tmp_path / "model", lm_weight=20.0, ctc_weight=0.0)
    monkeypatch.chdir(tmp_path / "model" / LM_FOLDER)  # not where the model is: the folder is still found

    def heard(model=moved, **options) -> list[str]:
        found = Transcriber.from_pretrained(model, device="cpu", vad=None, beam_size=4, **options)
        return [r.text for r in found.transcribe(paths)]

    assert heard() == ["one"] * len(paths)
    assert heard(lm_weight=0.0) == texts
    assert heard(mode="ctc_greedy") == heard(model_dir, mode="ctc_greedy")  # CTC spells "ni"
    grammar = tmp_path / "words.yaml"
    grammar.write_text("context:\n  expressions:\n    say:\n" +
                       "".join(f'      - "{t}"\n' for t in texts))
    assert heard(grammar=str(grammar)) == texts
    assert heard(grammar=str(grammar), lm=str(one_lm)) == texts
    inside = Transcriber.from_pretrained(moved, device="cpu", vad=None, beam_size=4,
                                         grammar=str(grammar))
    scored = inside.transcribe_scored([inside.load(p) for p in paths])
    assert [text for text, _ in scored] == texts  # the grammar's search: no LM
    assert [inside.tokenizer.decode(h.free_tokens) for _, h in scored] == ["one"] * len(paths)
    escaping = own_lm_copy(model_dir, one_lm, tmp_path / "escaping", lm="../lm")
    with pytest.raises(ModelDirError, match=f"^{escaping}/config.yaml: decode.lm must name a "
                                            "folder inside the model directory, got '../lm'$"):
        Transcriber.from_pretrained(escaping, device="cpu")


def test_lm_errors_are_one_line(overfit_model, one_lm, tmp_path, capsys):
    model_dir, _, _ = overfit_model
    other = Tokenizer.train(["a b c d e f g"] * 10, vocab_size=12)
    with pytest.raises(ModelDirError, match=f"^{one_lm}: this language model was trained with "
                                            "another tokenizer than the recogniser's"):
        load_lm(one_lm, other)
    with pytest.raises(ModelDirError, match=f"^{tmp_path}: not a language model directory"):
        load_lm(tmp_path, other)
    text = tmp_path / "t.txt"
    text.write_text("one two\n")
    cases = [(["--steps", "5"], "error: --warmup-steps (5) must be between 0 and --steps (5)"),
             ([], f"error: {one_lm}: holds a language model already (pass --overwrite)")]
    for extra, message in cases:
        out = one_lm if not extra else tmp_path / "new"
        assert small_lm(model_dir, text, out, *extra) == 1
        assert capsys.readouterr().err.splitlines() == [message]
    missing, fifo = tmp_path / "missing.txt", tmp_path / "fifo"
    os.mkfifo(fifo)
    for source, problem in [(missing, "cannot read the text file (No such file or directory)"),
                            (fifo, "the text file is not a regular file (a device, pipe or "
                                   "socket); refused")]:
        assert small_lm(model_dir, source, tmp_path / "new") == 1  # a FIFO used to hang
        assert capsys.readouterr().err.splitlines() == [f"error: {source}: {problem}"]
    for extra, message in [  # each a traceback (or a division by zero) before
            (["--device", "foo"], "error: device must be auto, cpu, cuda or cuda:N, got 'foo'"),
            (["--heads", "3"], "error: dims.n_head (3) must divide dims.d_model (32)"),
            (["--lr", "nan"], "asr-train-lm: error: argument --lr: must be in [1e-12, 10], got "
                              "nan (see --help)"),
            (["--eval-every", "0"], "asr-train-lm: error: argument --eval-every: must be in [1, "
                                    "1073741824], got 0 (see --help)")]:
        try:
            status = small_lm(model_dir, text, tmp_path / "new", *extra)
        except SystemExit as stop:
            status = stop.code
        assert status in (1, 2) and capsys.readouterr().err.splitlines() == [message]
    with pytest.raises(ValueError, match="^decode.lm fuses with the attention search"):
        DecodingOptions(mode="ctc_greedy", lm="x")
    with pytest.raises(ValueError, match=r"^decode.lm_weight must be in \[0, 100\], got -1"):
        DecodingOptions(lm_weight=-1)
