"""Waveform augmentation on real recordings, each part against its definition: exact length,
SNR, gain, band, codec and impulse response; training-only hook."""

import json

import numpy as np
import pytest
import soundfile as sf
import torch

from asr.audio import load_audio
from asr.augment import (
    AugmentConfig,
    Augmenter,
    add_noise,
    apply_gain,
    babble,
    band_limit,
    clip_edges,
    codec,
    convolve,
    fft_length,
    loud_span,
    reverberate,
    speed_perturb,
    telephone,
)
from asr.data import SpeechDataset, Utterance, collate
from asr.rooms import measured_rt60, write_rooms
from helpers import COMMANDS, SHARED, fsdd_file, require_shared, train_config, write_manifest
from recipes.common.corpora import WUW_FORMAT

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]


def power(x: torch.Tensor) -> float:
    return float(x.double().pow(2).mean())


@pytest.fixture(scope="module")
def speech() -> torch.Tensor:
    require_shared()
    return load_audio(sorted((COMMANDS / "yes").glob("*.wav"))[0], 16000)


@pytest.fixture(scope="module")
def noise() -> torch.Tensor:
    return load_audio(sorted((COMMANDS / "_silence_").glob("*.wav"))[0], 16000)


def test_8khz_audio_is_loaded_at_16khz():
    path = fsdd_file(3, "lucas", 7)
    assert sf.info(str(path)).samplerate == 8000
    assert len(load_audio(path, 16000)) == 2 * sf.info(str(path)).frames


@pytest.mark.parametrize("factor", [0.9, 1.1])
def test_speed_changes_length_by_the_factor(speech, factor):
    out = speed_perturb(speech, 16000, factor)
    assert abs(len(out) - len(speech) / factor) <= 1
    assert speed_perturb(speech, 16000, 1.0) is speech


@pytest.mark.parametrize("snr", [0.0, 10.0, 25.0])
def test_noise_is_added_at_the_requested_snr(speech, noise, snr):
    short = noise[:4000]  # shorter than the speech: looped to its length
    noisy = add_noise(speech, short, snr)
    assert noisy.shape == speech.shape
    measured = 10 * torch.log10(torch.tensor(power(speech) / power(noisy - speech)))
    assert measured.item() == pytest.approx(snr, abs=0.05)


def test_gain_scales_by_decibels(speech):
    assert torch.allclose(apply_gain(speech, 6.0), speech * 10 ** 0.3)
    assert power(apply_gain(speech, -20.0)) == pytest.approx(power(speech) / 100, rel=1e-5)


def test_narrowband_removes_energy_above_half_the_rate(speech):
    narrow = band_limit(speech, 16000, 8000)
    assert narrow.shape == speech.shape
    spectrum = torch.fft.rfft(speech.double()).abs().square()
    narrow_spectrum = torch.fft.rfft(narrow.double()).abs().square()
    # 5 kHz and up: past the images that loading an 8 kHz file at 16 kHz leaves at 4-4.5 kHz
    top = len(spectrum) * 5 // 8
    assert spectrum[top:].sum() > 1e-3 * spectrum.sum()  # the recording has energy up there...
    assert narrow_spectrum[top:].sum() < 1e-3 * spectrum[top:].sum()  # ...which is gone
    low = len(spectrum) * 3 // 8  # below 3 kHz nothing changes
    assert float(narrow_spectrum[:low].sum()) == pytest.approx(float(spectrum[:low].sum()), rel=0.01)
    assert band_limit(speech, 16000, 16000) is speech
    # An 8 kHz recording loaded at 16 kHz already is narrowband: it passes (almost) unchanged.
    fsdd = load_audio(fsdd_file(3, "lucas", 7), 16000)
    assert power(band_limit(fsdd, 16000, 8000) - fsdd) < 1e-4 * power(fsdd)


def snr_db(clean: torch.Tensor, mixed: torch.Tensor) -> float:
    return 10 * torch.log10(torch.tensor(power(clean) / power(mixed - clean))).item()


def test_a_single_tap_impulse_response_changes_nothing(speech):
    assert torch.allclose(reverberate(speech, torch.tensor([1.0])), speech, atol=1e-6)
    # ...wherever the tap lies and whatever its size: aligned on it, power restored
    delayed = torch.zeros(800)
    delayed[300] = 0.25
    assert torch.allclose(reverberate(speech, delayed), speech, atol=1e-6)


def test_an_echo_adds_the_delayed_signal(speech):
    """Direct sound plus one reflection half as strong 20 ms later: exactly that sum, at the
    input's power."""
    echo = torch.zeros(321)
    echo[0], echo[320] = 1.0, 0.5
    expected = speech.clone()
    expected[320:] += 0.5 * speech[:-320]
    expected *= (power(speech) / power(expected)) ** 0.5
    assert torch.allclose(reverberate(speech, echo), expected, atol=1e-5)


@pytest.mark.parametrize("n, fast", [(0, 1), (1, 1), (7, 8), (97, 100), (10007, 10125), (53441, 54000)])
def test_the_fft_length_is_the_next_with_no_prime_factor_above_5(n, fast):
    assert fft_length(n) == fast


def test_the_fast_convolution_is_the_linear_convolution():
    """At lengths whose sum has a large prime factor (10007 + 4001 - 1 = 14007 = 3 x 7 x 23 x 29),
    against numpy's direct convolution."""
    generator = torch.Generator().manual_seed(0)
    wave, rir = torch.randn(10007, generator=generator), torch.randn(4001, generator=generator)
    direct = torch.from_numpy(np.convolve(wave.double().numpy(), rir.double().numpy()))
    assert torch.allclose(convolve(wave.double(), rir.double()), direct, atol=1e-9)


def test_simulated_rooms_reverberate(speech, tmp_path):
    """pyroomacoustics rooms: the manifest lists them, their responses decay about as asked,
    peak at 1 (so the loader takes them as float audio), and speech through them keeps its length
    and power but changes."""
    manifest = write_rooms(tmp_path / "rirs", count=2, rt60=(0.4, 0.4), seed=1)
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert [r["audio_filepath"] for r in rows] == ["rir_0000.wav", "rir_0001.wav"]
    for row in rows:
        rir = load_audio(tmp_path / "rirs" / row["audio_filepath"], 16000)
        assert float(rir.abs().max()) == pytest.approx(1.0)
        assert row["rt60_measured"] == pytest.approx(measured_rt60(rir.numpy(), 16000), abs=1e-3)
        assert 0.3 < row["rt60_measured"] < 0.8
        wet = reverberate(speech, rir)
        assert wet.shape == speech.shape and power(wet) == pytest.approx(power(speech), rel=1e-4)
        assert torch.corrcoef(torch.stack([wet, speech]))[0, 1] < 0.95


@pytest.mark.parametrize("snr", [0.0, 12.0])
def test_babble_is_mixed_at_the_requested_snr(speech, snr):
    """Four real people (Speech Commands' clips), each at the same power, summed; then mixed
    at the SNR asked."""
    clips = [load_audio(sorted((COMMANDS / word).glob("*.wav"))[5], 16000)
             for word in ("no", "up", "left", "go")]
    crowd = babble(clips, len(speech))
    assert crowd.shape == speech.shape
    assert power(babble(clips[:1], len(speech))) == pytest.approx(1.0, rel=1e-5)
    assert snr_db(speech, add_noise(speech, crowd, snr)) == pytest.approx(snr, abs=0.05)


def test_mu_law_of_a_mu_law_recording_is_itself():
    """G.711 mu-law is lossy once: a WUW call (recorded through it) comes back sample for
    sample; A-law and GSM change it, by their quantisation."""
    wave = torch.from_numpy(sf.read(SHARED / "wuw" / "calls" / "00000" / "WUWII00000_006.ulaw",
                                    dtype="float32", **WUW_FORMAT)[0])
    assert torch.equal(codec(wave, 8000, "ULAW"), wave)
    assert 30 < snr_db(wave, codec(wave, 8000, "ALAW")) < 45
    assert 5 < snr_db(wave, codec(wave, 8000, "GSM610")) < 25
    assert len(codec(wave, 8000, "GSM610")) == len(wave)


def test_telephone_keeps_the_telephone_band():
    """White noise over the line: 500-3000 Hz passes, below 100 Hz and above 4 kHz do not."""
    noise = torch.randn(4 * 16000, generator=torch.Generator().manual_seed(0)) * 0.1
    line = telephone(noise, 16000, "ULAW")
    assert line.shape == noise.shape
    before, after = (torch.fft.rfft(x.double()).abs().square() for x in (noise, line))
    hz = torch.fft.rfftfreq(len(noise), 1 / 16000)

    def gain(low: float, high: float) -> float:
        band = (hz >= low) & (hz < high)
        return 10 * torch.log10(after[band].sum() / before[band].sum()).item()

    assert gain(500, 3000) == pytest.approx(0.0, abs=0.5)
    assert gain(0, 100) < -20 and gain(4000, 8000) < -25


def test_augmenter_draws_each_enabled_part(speech, tmp_path):
    silence = sorted((COMMANDS / "_silence_").glob("*.wav"))[:3]
    manifest = write_manifest(tmp_path / "noise.jsonl", [(p, "") for p in silence])
    config = AugmentConfig.from_dict({
        "speed": {"enabled": True, "factors": [1.1]},
        "noise": {"enabled": True, "manifest": str(manifest), "prob": 1.0, "snr_db": [10, 10]},
        "gain": {"enabled": True, "db": [-6, -6]}})
    out = Augmenter(config, 16000)(speech)
    sped = speed_perturb(speech, 16000, 1.1)
    assert len(out) == len(sped)
    # Undo the gain; what is left beyond the sped-up speech is noise 10 dB below it.
    residual = apply_gain(out, 6.0) - sped
    assert 10 * torch.log10(torch.tensor(power(sped) / power(residual))).item() == \
        pytest.approx(10.0, abs=0.05)
    assert not AugmentConfig.from_dict(None).enabled
    assert not AugmentConfig.from_dict({"speed": {"factors": [0.9]}}).enabled


def test_the_speech_span_is_the_loud_frames_and_clipping_cuts_inside_it():
    """Silence around a tone: the span is the tone's frames exactly; each edge loses what it
    is asked, and never more than a quarter of the speech."""
    tone = 0.5 * torch.sin(torch.arange(8000) * 0.3)
    wave = torch.cat([torch.zeros(1600), tone, torch.zeros(3200)])
    assert loud_span(wave, 16000, 30.0) == (1600, 9600)
    assert len(clip_edges(wave, 16000, 0.0, 0.0, 30.0)) == 8000
    cut = clip_edges(wave, 16000, 50.0, 20.0, 30.0)
    assert torch.equal(cut, tone[800:8000 - 320])
    assert len(clip_edges(wave, 16000, 1000.0, 1000.0, 30.0)) == 4000  # a quarter each at most
    assert loud_span(torch.zeros(5000), 16000, 30.0) == (0, 5000)
    assert loud_span(torch.ones(50), 16000, 30.0) == (0, 50)


def test_clipped_edges_cut_a_real_word_to_its_speech(speech):
    """A Speech Commands clip (a word inside a second of near-silence) comes out shorter than
    its speech, which is shorter than the clip."""
    first, last = loud_span(speech, 16000, 30.0)
    assert 0 < last - first < len(speech) * 0.8
    config = AugmentConfig.from_dict({"edges": {"enabled": True, "prob": 1.0, "max_ms": 60}})
    out = Augmenter(config, 16000)(speech)
    assert (last - first) - 2 * 960 <= len(out) <= last - first
    assert any(torch.equal(out, speech[start:start + len(out)]) for start in range(first, last))


def test_augmenter_with_room_babble_and_telephone(speech, tmp_path):
    """Every part on at once: the speed sets the length, the rest keep it."""
    rooms = write_rooms(tmp_path / "rirs", count=1, seed=2)
    people = write_manifest(tmp_path / "people.jsonl",
                            [(p, "") for p in sorted((COMMANDS / "off").glob("*.wav"))[:5]])
    config = AugmentConfig.from_dict({
        "speed": {"enabled": True, "factors": [0.9]},
        "reverb": {"enabled": True, "manifest": str(rooms), "prob": 1.0},
        "babble": {"enabled": True, "manifest": str(people), "prob": 1.0, "speakers": [2, 3],
                   "pool": 4},
        "narrowband": {"enabled": True, "prob": 1.0},
        "telephone": {"enabled": True, "prob": 1.0, "codecs": ["GSM610"]},
        "gain": {"enabled": True}})
    augmenter = Augmenter(config, 16000)
    out = augmenter(speech)
    assert len(out) == len(speed_perturb(speech, 16000, 0.9)) and torch.isfinite(out).all()
    assert len(augmenter.clips("babble")) == 4 and len(augmenter.clips("reverb")) == 1


def test_augment_config_errors_are_one_line(tmp_path):
    with pytest.raises(ValueError, match="unknown part.*echo"):
        AugmentConfig.from_dict({"echo": {}})
    for part in ("reverb", "babble"):
        with pytest.raises(ValueError, match=f"augment.{part}: enabled but no manifest"):
            Augmenter(AugmentConfig.from_dict({part: {"enabled": True}}), 16000)
    with pytest.raises(ValueError, match="codecs: unknown to libsndfile: OPUSX"):
        Augmenter(AugmentConfig.from_dict({"telephone": {"enabled": True,
                                                         "codecs": ["ULAW", "OPUSX"]}}), 16000)
    with pytest.raises(ValueError, match="no manifest"):
        Augmenter(AugmentConfig.from_dict({"noise": {"enabled": True}}), 16000)
    with pytest.raises(ValueError, match="missing.jsonl: noise manifest not found"):
        Augmenter(AugmentConfig.from_dict(
            {"noise": {"enabled": True, "manifest": str(tmp_path / "missing.jsonl")}}), 16000)


@pytest.mark.train
def test_training_batches_are_augmented_and_dev_batches_are_not(tmp_path):
    """The trainer hooks augmentation into its training loader only."""
    from asr.train import Trainer

    require_shared()
    entries = [(fsdd_file(d, "jackson"), w) for d, w in [(1, "one"), (2, "two")]]
    manifest = write_manifest(tmp_path / "m.jsonl", entries)
    cfg = train_config(tmp_path, manifest, "tokenizer.vocab_size=12", "data=fsdd",
                       "data.augment.speed.enabled=true", "data.augment.speed.factors=[0.9]",
                       f"data.train_manifest={manifest}", f"data.dev_manifest={manifest}")
    trainer = Trainer(cfg)
    assert isinstance(trainer.train_loader.dataset.augment, Augmenter)
    assert trainer.dev_loader.dataset.augment is None
    train_wave, _ = trainer.train_loader.dataset[0]
    dev_wave, _ = trainer.dev_loader.dataset[0]
    assert abs(len(train_wave) - len(dev_wave) / 0.9) <= 1


def test_empty_transcripts_make_a_batch():
    """Silence has empty text; a batch of only silence trains (the model's only target: EOS)."""
    from asr.features import FeatureConfig
    from asr.model import ModelDimensions, SpeechTransformer
    from asr.tokenizer import Tokenizer

    tokenizer = Tokenizer.train(["yes", "no"] * 5, vocab_size=12)
    clip = sorted((COMMANDS / "_silence_").glob("*.wav"))[0]
    dataset = SpeechDataset([Utterance(str(clip), "", 1.0)] * 2, tokenizer, 16000)
    batch = collate([dataset[0], dataset[1]])
    assert batch["tokens"].shape == (2, 0)
    model = SpeechTransformer(ModelDimensions(n_vocab=tokenizer.vocab_size, d_model=32, n_head=2,
                                              d_ff=64, n_encoder_layers=1, n_decoder_layers=1),
                              FeatureConfig())
    losses = model(batch["wave"], batch["lengths"], batch["tokens"])
    assert all(torch.isfinite(value) for value in losses.values())
