"""Waveform augmentation for training on real recordings: the speaker, the room, the line.

Real users differ from the few speakers of a small corpus in speaking rate and vocal-tract
length, speak in rooms with echoes, noise and other people, call over telephone lines, and
hold the microphone near or far. Each of these is simulated on the waveform, before the front
end, and only for training:

- speed perturbation (Ko et al. 2015, Kaldi's 0.9/1.0/1.1): resampling changes the tempo *and*
  shifts pitch and formants, so three factors act like three speakers per speaker;
- reverberation: convolution with a room impulse response from a manifest, measured ones or
  rooms simulated by `python -m asr.rooms` (Ko et al. 2017);
- additive noise from real background recordings (e.g. Speech Commands' `_silence_` clips) at
  a random signal-to-noise ratio;
- babble: several other people talking at once (real speech clips from a manifest, summed),
  at a random SNR;
- narrowband: a share of utterances passed through a lower sample rate and back (8 kHz: the
  telephone band and corpora like FSDD), so that a model trained on wide-band speech does not
  lean on frequencies above 4 kHz that such recordings never have;
- telephone: the telephone band (300-3400 Hz at 8 kHz) and a real telephone codec by
  libsndfile: G.711 mu-law or A-law (landlines) or GSM 06.10 (cell phones);
- a random gain in dB;
- clipped edges: a share of utterances start late and end early, cut inside the speech, as an
  energy trimmer (FSDD's digits), a voice-activity detector or a push-to-talk button cuts
  them: the weak first and last sounds (the /s/ of "six", a final /t/) are lost, and the word
  must be heard from what is left.

Configured under `data.augment` (conf/data/*.yaml), each part switched on by its own `enabled`
flag and all off by default. Random draws use torch's generator, so DataLoader workers (each
seeded by torch) draw differently and a resumed run restores the main process's state.
Audio at another rate (FSDD's 8 kHz) needs no step here: `asr.audio.load_audio` already
resamples every file to the model's rate.
"""

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

import scipy.fft
import soundfile as sf
import torch
import torchaudio.functional as AF
from omegaconf import DictConfig, OmegaConf

from asr.audio import load_audio, resample
from asr.data import read_manifest

TELEPHONE_RATE = 8000  # the rate a telephone line carries


@dataclass
class SpeedConfig:
    enabled: bool = False
    factors: list[float] = field(default_factory=lambda: [0.9, 1.0, 1.1])  # > 1 is faster (shorter)


@dataclass
class NoiseConfig:
    enabled: bool = False
    manifest: str | None = None  # JSON lines of noise recordings (their text is ignored)
    prob: float = 0.5  # share of utterances that get noise
    snr_db: list[float] = field(default_factory=lambda: [0.0, 20.0])  # SNR drawn uniformly from [low, high]


@dataclass
class NarrowbandConfig:
    enabled: bool = False
    prob: float = 0.5  # share of utterances band-limited
    rate: int = 8000  # the rate they pass through: energy above rate / 2 is removed


@dataclass
class GainConfig:
    enabled: bool = False
    db: list[float] = field(default_factory=lambda: [-10.0, 6.0])  # gain drawn uniformly from [low, high] dB


@dataclass
class ReverbConfig:
    enabled: bool = False
    manifest: str | None = None  # JSON lines of impulse responses (`python -m asr.rooms`)
    prob: float = 0.5  # share of utterances reverberated


@dataclass
class BabbleConfig:
    enabled: bool = False
    manifest: str | None = None  # JSON lines of speech (e.g. the training manifest); text ignored
    prob: float = 0.3  # share of utterances with other people talking behind them
    speakers: list[int] = field(default_factory=lambda: [3, 6])  # clips summed: uniform in [low, high]
    snr_db: list[float] = field(default_factory=lambda: [5.0, 20.0])  # SNR drawn uniformly from [low, high]
    pool: int = 300  # clips drawn at random from the manifest, loaded once (per worker)


@dataclass
class TelephoneConfig:
    enabled: bool = False
    prob: float = 0.3  # share of utterances passed through a telephone line
    # libsndfile subtypes, one drawn each time
    codecs: list[str] = field(default_factory=lambda: ["ULAW", "ALAW", "GSM610"])
    low_hz: float = 300.0  # the telephone band: low_hz .. high_hz at 8 kHz
    high_hz: float = 3400.0


@dataclass
class EdgesConfig:
    enabled: bool = False
    prob: float = 0.2  # share of utterances cut at the edges of their speech
    max_ms: float = 80.0  # each edge loses a uniform 0 .. max_ms of speech (at most a quarter)
    floor_db: float = 30.0  # speech: the span of 10 ms frames within floor_db of the loudest


@dataclass
class AugmentConfig:
    speed: SpeedConfig = field(default_factory=SpeedConfig)
    noise: NoiseConfig = field(default_factory=NoiseConfig)
    narrowband: NarrowbandConfig = field(default_factory=NarrowbandConfig)
    gain: GainConfig = field(default_factory=GainConfig)
    reverb: ReverbConfig = field(default_factory=ReverbConfig)
    babble: BabbleConfig = field(default_factory=BabbleConfig)
    telephone: TelephoneConfig = field(default_factory=TelephoneConfig)
    edges: EdgesConfig = field(default_factory=EdgesConfig)

    @classmethod
    def from_dict(cls, options: Mapping | None) -> "AugmentConfig":
        """From `data.augment` (a plain mapping); missing parts stay off."""
        if isinstance(options, DictConfig):
            options = OmegaConf.to_container(options, resolve=True)
        options = dict(options or {})
        parts = {f.name: f.default_factory for f in fields(cls)}
        unknown = set(options) - set(parts)
        if unknown:
            raise ValueError(f"data.augment: unknown part(s) {', '.join(sorted(unknown))}")
        return cls(**{name: part(**dict(options.get(name) or {})) for name, part in parts.items()})

    @property
    def enabled(self) -> bool:
        return any(getattr(self, f.name).enabled for f in fields(self))


def speed_perturb(wave: torch.Tensor, sample_rate: int, factor: float) -> torch.Tensor:
    """Play `wave` `factor` times faster: length / factor, pitch and formants x factor."""
    if factor == 1.0:
        return wave
    return AF.speed(wave, sample_rate, factor)[0]


def add_noise(wave: torch.Tensor, noise: torch.Tensor, snr_db: float) -> torch.Tensor:
    """Add `noise` (looped or cut to length) scaled to `snr_db` below the signal's power."""
    if len(noise) < len(wave):
        noise = noise.repeat(len(wave) // len(noise) + 1)
    noise = noise[:len(wave)]
    if not noise.abs().max() > 0 or not wave.abs().max() > 0:
        return wave
    return AF.add_noise(wave[None], noise[None], torch.tensor([float(snr_db)]))[0]


def band_limit(wave: torch.Tensor, sample_rate: int, rate: int) -> torch.Tensor:
    """`wave` as if recorded at `rate` and then loaded at `sample_rate`: same length, nothing
    left above rate / 2 but what `load_audio`'s resampling itself puts there. The way down is a
    sharp filter (a recorder's anti-aliasing; torchaudio's default 6 zero crossings let through
    several times the energy at 4.25-4.5 kHz); the way up is `load_audio`'s."""
    if rate >= sample_rate:
        return wave
    low = AF.resample(wave, sample_rate, rate, lowpass_filter_width=64)
    return resample(low, rate, sample_rate)[:len(wave)]


def apply_gain(wave: torch.Tensor, gain_db: float) -> torch.Tensor:
    return wave * 10 ** (gain_db / 20)


def fft_length(n: int) -> int:
    """The smallest length >= `n` (at least 1) with no prime factor above 5: an FFT of a
    length with a large prime factor is several times slower (BENCHMARKS.md, section 7)."""
    return scipy.fft.next_fast_len(max(n, 1), real=True)


def convolve(wave: torch.Tensor, rir: torch.Tensor) -> torch.Tensor:
    """The full linear convolution of two 1-D signals, by FFT at a fast length (torchaudio's
    `fftconvolve` transforms at exactly len(wave) + len(rir) - 1 samples)."""
    n = len(wave) + len(rir) - 1
    size = fft_length(n)
    spectrum = torch.fft.rfft(wave, size) * torch.fft.rfft(rir, size)
    return torch.fft.irfft(spectrum, size)[:n]


def reverberate(wave: torch.Tensor, rir: torch.Tensor) -> torch.Tensor:
    """`wave` heard through the room whose impulse response is `rir`: convolved, aligned on
    the direct sound (the response's strongest tap, so nothing is delayed), cut to the
    input's length and scaled back to the input's power (loudness is the gain part's)."""
    peak = int(rir.abs().argmax())
    wet = convolve(wave, rir.to(wave.dtype))[peak:peak + len(wave)]
    dry_power, wet_power = wave.pow(2).mean(), wet.pow(2).mean()
    if not (dry_power > 0 and wet_power > 0):
        return wave
    return wet * (dry_power / wet_power).sqrt()


def babble(clips: Sequence[torch.Tensor], length: int) -> torch.Tensor:
    """Several people talking at once: `clips` looped or cut to `length`, each at the same
    power, summed."""
    mixed = torch.zeros(length)
    for clip in clips:
        clip = clip.repeat(length // len(clip) + 1)[:length]
        power = clip.pow(2).mean()
        if power > 0:
            mixed += clip / power.sqrt()
    return mixed


def codec(wave: torch.Tensor, rate: int, subtype: str) -> torch.Tensor:
    """`wave` (at `rate`) encoded and decoded by a libsndfile codec: "ULAW"/"ALAW" (G.711),
    "GSM610" (GSM 06.10 full rate), "G721_32" (ADPCM), ... Same length as the input."""
    buffer = io.BytesIO()
    sf.write(buffer, wave.clamp(-1.0, 1.0).numpy(), rate, format="WAV", subtype=subtype)
    buffer.seek(0)
    decoded = torch.from_numpy(sf.read(buffer, dtype="float32")[0])[:len(wave)]
    return torch.nn.functional.pad(decoded, (0, len(wave) - len(decoded)))


def telephone(wave: torch.Tensor, sample_rate: int, subtype: str, low_hz: float = 300.0,
              high_hz: float = 3400.0) -> torch.Tensor:
    """`wave` as heard over a telephone line: down to 8 kHz, the band low_hz-high_hz (the
    telephone channel's filters, G.712), through the codec, back at `sample_rate`."""
    line = TELEPHONE_RATE
    narrow = AF.resample(wave, sample_rate, line, lowpass_filter_width=64)
    narrow = AF.lowpass_biquad(AF.highpass_biquad(narrow, line, low_hz), line, high_hz)
    return resample(codec(narrow, line, subtype), line, sample_rate)[:len(wave)]


def loud_span(wave: torch.Tensor, sample_rate: int, floor_db: float) -> tuple[int, int]:
    """The samples from the first to the last 10 ms frame whose energy is within `floor_db`
    of the loudest frame's (the whole wave when it is silent or shorter than a frame)."""
    hop = sample_rate // 100
    if len(wave) < hop:
        return 0, len(wave)
    energy = wave[:len(wave) // hop * hop].reshape(-1, hop).pow(2).mean(dim=1)
    if not energy.max() > 0:
        return 0, len(wave)
    loud = (energy >= energy.max() * 10 ** (-floor_db / 10)).nonzero().flatten()
    return int(loud[0]) * hop, (int(loud[-1]) + 1) * hop


def clip_edges(wave: torch.Tensor, sample_rate: int, start_ms: float, end_ms: float,
               floor_db: float) -> torch.Tensor:
    """`wave` cut to its speech (`loud_span`) less `start_ms` at the start and `end_ms` at
    the end, each at most a quarter of the speech, so that most of it is always kept."""
    first, last = loud_span(wave, sample_rate, floor_db)
    most = (last - first) // 4
    first += min(int(start_ms * sample_rate / 1000), most)
    last -= min(int(end_ms * sample_rate / 1000), most)
    return wave[first:last]


def _uniform(low_high: Sequence[float]) -> float:
    low, high = (float(x) for x in low_high)
    return low + (high - low) * torch.rand(()).item()


class Augmenter:
    """Clipped edges first (on the clean speech, where its span is plain to find), then speed
    (the speaker), then reverberation, noise and babble (the room), then the narrow band and
    the telephone line (the channel follows the room), then gain, each drawn per utterance
    where enabled."""

    def __init__(self, config: AugmentConfig, sample_rate: int) -> None:
        self.config, self.sample_rate = config, sample_rate
        self._clips: dict[str, list[torch.Tensor]] = {}
        for name, what in (("noise", "noise recordings"), ("reverb", "impulse responses"),
                           ("babble", "speech")):
            part = getattr(config, name)
            if part.enabled and not part.manifest:
                raise ValueError(f"data.augment.{name}: enabled but no manifest of {what} given "
                                 f"(data.augment.{name}.manifest=...)")
            if part.enabled and not Path(part.manifest).is_file():
                raise ValueError(f"{part.manifest}: {name} manifest not found")
        unknown = set(config.telephone.codecs) - set(sf.available_subtypes("WAV"))
        if config.telephone.enabled and unknown:
            raise ValueError(f"data.augment.telephone.codecs: unknown to libsndfile: "
                             f"{', '.join(sorted(unknown))}")

    def clips(self, name: str) -> list[torch.Tensor]:
        """The recordings of part `name`'s manifest at the model's rate, loaded on first use
        (per worker); for babble, `pool` of them drawn at random."""
        if name not in self._clips:
            part = getattr(self.config, name)
            utterances = read_manifest(part.manifest)
            if name == "babble" and len(utterances) > part.pool:
                utterances = [utterances[i] for i in torch.randperm(len(utterances))[:part.pool]]
            self._clips[name] = [load_audio(u.audio_filepath, self.sample_rate)
                                 for u in utterances]
        return self._clips[name]

    def _pick(self, name: str) -> torch.Tensor:
        recordings = self.clips(name)
        return recordings[torch.randint(len(recordings), ()).item()]

    def _excerpt(self, clip: torch.Tensor, length: int) -> torch.Tensor:
        """A random stretch of `length` samples of a longer clip (a shorter one whole)."""
        if len(clip) <= length:
            return clip
        start = torch.randint(len(clip) - length + 1, ()).item()
        return clip[start:start + length]

    def __call__(self, wave: torch.Tensor) -> torch.Tensor:
        config = self.config
        if self._drawn(config.edges):
            wave = clip_edges(wave, self.sample_rate, _uniform([0, config.edges.max_ms]),
                              _uniform([0, config.edges.max_ms]), config.edges.floor_db)
        if config.speed.enabled:
            factors = config.speed.factors
            factor = float(factors[torch.randint(len(factors), ()).item()])
            wave = speed_perturb(wave, self.sample_rate, factor)
        if self._drawn(config.reverb):
            wave = reverberate(wave, self._pick("reverb"))
        if self._drawn(config.noise):
            wave = add_noise(wave, self._excerpt(self._pick("noise"), len(wave)),
                             _uniform(config.noise.snr_db))
        if self._drawn(config.babble):
            low, high = (int(n) for n in config.babble.speakers)
            count = torch.randint(low, high + 1, ()).item()
            voices = [self._excerpt(self._pick("babble"), len(wave)) for _ in range(count)]
            wave = add_noise(wave, babble(voices, len(wave)), _uniform(config.babble.snr_db))
        if self._drawn(config.narrowband):
            wave = band_limit(wave, self.sample_rate, config.narrowband.rate)
        if self._drawn(config.telephone):
            line = config.telephone
            subtype = line.codecs[torch.randint(len(line.codecs), ()).item()]
            wave = telephone(wave, self.sample_rate, subtype, line.low_hz, line.high_hz)
        if config.gain.enabled:
            wave = apply_gain(wave, _uniform(config.gain.db))
        return wave

    @staticmethod
    def _drawn(part) -> bool:
        """Whether a part with a `prob` applies to this utterance."""
        return part.enabled and torch.rand(()).item() < part.prob
