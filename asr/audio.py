"""Audio in: any file soundfile reads (WAV, FLAC, OGG, MP3, ...; any rate, bit depth, channels)
-> mono float32 at the model's rate.

soundfile reads the file (torchaudio.load would need FFmpeg); torchaudio resamples. Every
failure becomes one `AudioError` whose message starts with the file name, so a CLI can print
a single clear line instead of a traceback.

Files are decoded in blocks and mixed down to mono block by block, and the header's duration
is checked before anything is decoded: a file that declares hours of audio, or thousands of
channels, costs one block of memory before it is refused. `stream_audio` gives the same
checked blocks to callers that want to walk a long recording (e.g. into `asr.vad`).

Samples are floats in [-1, 1], the scale the front end and its statistics assume. Samples far
outside it (a peak over MAX_PEAK, 6 dB above full scale) are integer PCM mistaken for floats,
most likely, and would transcribe to nothing or to garbage. An array (the Python API), whole
at hand, is taken with a warning as the PCM it holds when its samples are whole numbers (int16
values divided by 32768, as soundfile reads them), else scaled to a peak of 1; a float file,
decoded a block at a time, is refused with its AudioError.
"""

import math
import numbers
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import soundfile as sf
import torch
import torchaudio.functional as AF

from asr.untrusted import first_line

MIN_RATE, MAX_RATE = 4000, 384000  # below 4 kHz there is no speech band left to hear
MAX_SECONDS = 300.0  # one input; longer recordings are cut into utterances first (asr.vad)
MAX_CHANNELS = 64  # in-memory arrays: the shorter axis of a 2-D array, if no longer than this
MAX_RESAMPLE_PHASES = 4_000_000  # reduced rate product: size of torchaudio's sinc kernel
MAX_PEAK = 2.0  # largest |sample| taken as it is: 6 dB over full scale
# Channels mixed to mono by their mean, unless that mean keeps less than this share of the
# energy it would have if no channel cancelled another (the square of the channels' mean RMS):
# then they cancel (one inverted, or out of phase) and the loudest channel alone is taken.
# Copies of one signal keep 1 (a voice in one of six channels too), equal uncorrelated
# channels 0.5, a channel and its inverse 0.
CANCEL_SHARE = 0.1
# A WAV data size written before the length was known (a stream from a pipe): sox writes
# 0x7FFFF000, others 0xFFFFFFFF. The samples are then whatever the file holds.
STREAMED_WAV_SIZES = (0x7FFFF000, 0xFFFFFFFF)
_WAVE_PCM, _WAVE_EXTENSIBLE = 0x0001, 0xFFFE  # a WAV fmt chunk's format tags of integer PCM
_BLOCK_SAMPLES = 1 << 20  # samples (frames x channels) decoded at a time
OGG_PAGE = b"OggS"  # every Ogg page (Vorbis, Opus, FLAC in Ogg) starts with it
OGG_EOS = 0x04  # header-type flag of a logical stream's last page
_BIT_REVERSED = bytes(int(f"{i:08b}"[::-1], 2) for i in range(256))


class AudioError(ValueError):
    """A file that cannot be used as audio; the message names the file and the problem."""

    def __init__(self, path: str | Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


def stream_audio(path: str | Path, max_seconds: float | None = None,
                 ) -> tuple[Iterator[np.ndarray], int]:
    """Open and check a file; return its mono float32 blocks (lazily) and its sample rate.

    The header is checked now (readable, supported rate, not longer than `max_seconds`); each
    block is checked as it is decoded (finite samples, no more than declared, nothing missing).
    """
    path = Path(path)
    _check_path(path)
    streamed = _check_wav_length(path)
    _check_ogg_pages(path)
    try:
        audio = sf.SoundFile(str(path))
    except (sf.LibsndfileError, RuntimeError, ValueError, TypeError, OSError) as err:
        raise AudioError(path, f"not readable as audio ({first_line(err)})") from None
    rate = audio.samplerate
    try:
        _check_rate(path, rate)
        if not streamed and max_seconds is not None and audio.frames > max_seconds * rate:
            raise _too_long(path, audio.frames / rate, max_seconds)
    except AudioError:
        audio.close()
        raise
    return _blocks(path, audio, max_seconds, None if streamed else audio.frames), rate


def _blocks(path: Path, audio: sf.SoundFile, max_seconds: float | None,
            declared: int | None) -> Iterator[np.ndarray]:
    """Decode `audio` block by block, mixed to mono, checking every block against the
    `declared` length (None: unknown); closes the file."""
    with audio:
        rate, frames = audio.samplerate, 0
        block_frames = max(1, _BLOCK_SAMPLES // audio.channels)
        while True:
            try:
                block = audio.read(block_frames, dtype="float32", always_2d=True)
            except (sf.LibsndfileError, RuntimeError, ValueError) as err:
                raise AudioError(path, f"not readable as audio ({first_line(err)})") from None
            if len(block) == 0:
                break
            frames += len(block)
            if not np.isfinite(block).all():
                raise AudioError(path, "contains NaN or infinite samples")
            peak = float(np.abs(block).max(initial=0.0))
            if peak > MAX_PEAK:
                raise AudioError(path, f"samples reach {peak:.6g}, far outside [-1, 1] (integer "
                                       "PCM stored as floats?); refused")
            if max_seconds is not None and frames > max_seconds * rate:
                raise _too_long(path, frames / rate, max_seconds)
            yield mono(block)
        if declared is not None and frames < declared:
            raise AudioError(path, f"truncated or corrupt: header declares {declared} frames, "
                                   f"{frames} could be decoded")


def read_audio(path: str | Path, max_seconds: float | None = MAX_SECONDS,
               ) -> tuple[np.ndarray, int]:
    """Read a whole file as mono float32 samples and its sample rate, checking it."""
    blocks, rate = stream_audio(path, max_seconds)
    samples = list(blocks)
    if not samples:
        raise AudioError(path, "contains no samples")
    return np.concatenate(samples), rate


def _check_path(path: Path) -> None:
    try:
        exists, is_dir = path.exists(), path.is_dir()
        empty = exists and not is_dir and path.stat().st_size == 0
    except (OSError, ValueError) as err:  # permissions, names too long or with NUL bytes
        raise AudioError(path, f"cannot open ({first_line(err)})") from None
    if not exists:
        raise AudioError(path, "no such file")
    if is_dir:
        raise AudioError(path, "is a directory, not an audio file")
    if empty:
        raise AudioError(path, "empty file")


def _check_wav_length(path: Path) -> bool:
    """Refuse a WAV whose data chunk is shorter than its header declares; True for a WAV
    streamed with its length unknown (STREAMED_WAV_SIZES), whose header's length means
    nothing.

    libsndfile silently reads what is there, so a file cut off mid-copy would otherwise be
    transcribed as if the speaker had stopped talking.
    """
    try:
        with path.open("rb") as f:
            header = f.read(12)
            if len(header) < 12 or header[:4] != b"RIFF" or header[8:12] != b"WAVE":
                return False
            while chunk := f.read(8):
                if len(chunk) < 8:
                    return False
                size = int.from_bytes(chunk[4:], "little")
                if chunk[:4] == b"data":
                    if size in STREAMED_WAV_SIZES:
                        return True
                    available = path.stat().st_size - f.tell()
                    if 0 < size and available < size:
                        raise AudioError(path, f"truncated: header declares {size} bytes of "
                                               f"audio, file holds {available}")
                    return False
                if chunk[:4] == b"fmt ":
                    _check_wav_bits(path, f.read(min(size, 16)))
                    size -= min(size, 16)
                f.seek(size + size % 2, 1)
    except OSError as err:
        raise AudioError(path, f"cannot open ({first_line(err)})") from None
    return False


def _check_wav_bits(path: Path, fmt: bytes) -> None:
    """Refuse PCM whose bits per sample are not whole bytes (7, 12, ...): libsndfile reads 7
    bits as unsigned 8-bit PCM, whatever the writer meant, and the result was silently
    nothing. Compressed formats (ADPCM's 4 bits) are libsndfile's to read or refuse."""
    if len(fmt) < 16:
        return
    tag, bits = int.from_bytes(fmt[:2], "little"), int.from_bytes(fmt[14:16], "little")
    if tag in (_WAVE_PCM, _WAVE_EXTENSIBLE) and bits not in (8, 16, 24, 32):
        raise AudioError(path, f"declares {bits} bits per sample; only 8, 16, 24 and 32-bit "
                               "PCM are read (write it again as 16-bit PCM)")


def _check_ogg_pages(path: Path) -> None:
    """Refuse an Ogg file whose pages do not chain from its first byte to the last page of
    each stream, each with a good checksum. libsndfile skips a page that fails its checksum
    and stops where a file is cut, and the length it reports then agrees with what it decodes:
    a corrupt or truncated file would be transcribed as if less had been said."""
    ends: dict[int, bool] = {}  # stream serial -> its last page seen
    sequence: dict[int, int] = {}
    try:
        with path.open("rb") as f:
            while header := f.read(27):
                at = f.tell() - len(header)
                if header[:4] != OGG_PAGE:
                    if at == 0:
                        return  # not an Ogg file
                    raise AudioError(path, f"corrupt: no Ogg page at byte {at}")
                table = f.read(header[26]) if len(header) == 27 else b""
                body = f.read(sum(table))
                if len(header) < 27 or len(table) < header[26] or len(body) < sum(table):
                    raise AudioError(path, f"truncated: the Ogg page at byte {at} is cut off")
                page = header[:22] + bytes(4) + header[26:] + table + body
                if _ogg_crc(page) != int.from_bytes(header[22:26], "little"):
                    raise AudioError(path, f"corrupt: the Ogg page at byte {at} fails its "
                                           "checksum")
                serial, number = (int.from_bytes(header[i:i + 4], "little") for i in (14, 18))
                if serial in sequence and number != sequence[serial] + 1:
                    raise AudioError(path, f"corrupt: Ogg page {sequence[serial] + 1} is missing "
                                           f"(byte {at} holds page {number})")
                sequence[serial] = number
                ends[serial] = bool(header[5] & OGG_EOS)
    except OSError as err:
        raise AudioError(path, f"cannot open ({first_line(err)})") from None
    if not all(ends.values()):
        raise AudioError(path, "truncated: the Ogg stream ends before its last page")


def _ogg_crc(page: bytes) -> int:
    """Ogg's CRC-32 (polynomial 0x04C11DB7, not reflected, no initial or final XOR), from
    zlib's reflected CRC-32: on bit-reversed bytes, corrected for zlib's initial and final
    XOR (whose effect depends on the length alone), and bit-reversed back."""
    reflected = zlib.crc32(page.translate(_BIT_REVERSED)) ^ zlib.crc32(bytes(len(page)))
    return int(f"{reflected:032b}"[::-1], 2)


def _check_rate(name: str | Path, rate: int) -> None:
    if not MIN_RATE <= rate <= MAX_RATE:
        raise AudioError(name, f"sample rate {rate} Hz is outside the supported "
                               f"{MIN_RATE}-{MAX_RATE} Hz")


def _too_long(path: str | Path, seconds: float, max_seconds: float) -> AudioError:
    return AudioError(path, f"too long: {seconds:.1f} s, over the {max_seconds:g} s limit for "
                            "one input (cut it into utterances first, e.g. with asr.vad)")


def resample(wave: torch.Tensor, orig_rate: int, new_rate: int) -> torch.Tensor:
    """Resample a 1-D waveform with torchaudio's band-limited sinc interpolation."""
    if orig_rate == new_rate:
        return wave
    return AF.resample(wave, orig_rate, new_rate)


def _check_conversion(name: str | Path, rate: int, new_rate: int) -> None:
    """Refuse rates whose exact conversion would need a huge polyphase kernel.

    torchaudio builds (rate/g) x (new_rate/g) filter phases (g = their gcd): a few hundred
    for the usual rates, but 16000 x 16001 (a gigabyte) for a rate like 16001 Hz.
    """
    if isinstance(new_rate, bool) or not isinstance(new_rate, numbers.Integral) \
            or not MIN_RATE <= new_rate <= MAX_RATE:
        raise ValueError(f"the sample rate to convert to must be a whole number of Hz in "
                         f"{MIN_RATE}-{MAX_RATE}, got {new_rate!r}")
    g = math.gcd(rate, new_rate)
    if (rate // g) * (new_rate // g) > MAX_RESAMPLE_PHASES:
        raise AudioError(name, f"sample rate {rate} Hz cannot be converted to {new_rate} Hz "
                               "efficiently; resample it to a standard rate (e.g. 16000 Hz)")


def load_audio(path: str | Path, sample_rate: int,
               max_seconds: float | None = MAX_SECONDS) -> torch.Tensor:
    """Load a file as a 1-D float32 tensor of mono samples at `sample_rate`."""
    samples, rate = read_audio(path, max_seconds)
    _check_conversion(path, rate, sample_rate)
    return resample(torch.from_numpy(samples), rate, sample_rate)


def prepare_array(samples: np.ndarray | torch.Tensor, rate: int, sample_rate: int,
                  name: str = "<array>", max_seconds: float | None = MAX_SECONDS) -> torch.Tensor:
    """Check and convert in-memory samples like a loaded file, to mono float32 at `sample_rate`.

    1-D, or 2-D in either layout: frames x channels (soundfile, scipy) or channels x frames
    (torchaudio), the channels being the shorter axis of at most MAX_CHANNELS. Integer PCM
    (uint8, int8, int16, int32: scipy's WAV reader) is scaled to [-1, 1) as soundfile does;
    floats whose peak is over MAX_PEAK are scaled back into it, with a warning
    (`_within_full_scale`).
    """
    array = _float_samples(samples, name)
    if array.ndim == 2:
        array = _mix_down(array, name)
    if array.ndim != 1 or array.numel() == 0:
        raise AudioError(name, f"expected a non-empty 1-D or 2-D array, got shape {tuple(array.shape)}")
    if not torch.isfinite(array).all():
        raise AudioError(name, "contains NaN or infinite samples")
    array = _within_full_scale(array, name)
    if isinstance(rate, bool) or not isinstance(rate, numbers.Integral):
        raise AudioError(name, f"sample rate must be a whole number of Hz, got {rate!r}")
    _check_rate(name, rate)
    if max_seconds is not None and len(array) > max_seconds * rate:
        raise _too_long(name, len(array) / rate, max_seconds)
    _check_conversion(name, rate, sample_rate)
    return resample(array, rate, sample_rate)


def _float_samples(samples: object, name: str) -> torch.Tensor:
    """The samples as a CPU tensor of their own: a tensor is detached from its autograd graph
    and brought from its device, a numpy array made contiguous in native byte order (a
    reversed view, a big-endian file's samples)."""
    try:
        array = _tensor(samples)
    except (TypeError, ValueError, RuntimeError, NotImplementedError) as err:
        raise AudioError(name, f"not an array of samples ({first_line(err)})") from None
    if array.is_floating_point():
        return array.float()
    scale = {torch.uint8: 128.0, torch.int8: 128.0, torch.int16: 32768.0,
             torch.int32: 2147483648.0}.get(array.dtype)
    if scale is None:
        raise AudioError(name, f"samples must be floats in [-1, 1] or 8/16/32-bit integer PCM, "
                               f"got {array.dtype}")
    offset = 128.0 if array.dtype == torch.uint8 else 0.0
    return (array.double() - offset).div(scale).float()


def _tensor(samples: object) -> torch.Tensor:
    if isinstance(samples, torch.Tensor):
        kind = "nested" if samples.is_nested else "meta" if samples.is_meta \
            else None if samples.layout == torch.strided else str(samples.layout).removeprefix("torch.")
        if kind:
            raise TypeError(f"a {kind} tensor has no plain samples to read")
        return samples.detach().cpu()
    if isinstance(samples, np.ndarray):
        samples = np.ascontiguousarray(samples, dtype=samples.dtype.newbyteorder("="))
    return torch.as_tensor(samples)


def _within_full_scale(array: torch.Tensor, name: str) -> torch.Tensor:
    """`array` as it is when its peak is at most MAX_PEAK; else, with a warning, integer PCM
    passed as floats (whole numbers within int16's or int32's range) scaled as that integer
    type is, and other samples scaled to a peak of 1."""
    peak = float(array.abs().max())
    if peak <= MAX_PEAK:
        return array
    whole = bool(torch.equal(array, array.round()))
    scale = next((s for s in (32768.0, 2147483648.0) if whole and peak <= s), peak)
    taken = f"taken as {'16' if scale == 32768 else '32'}-bit PCM" if scale != peak \
        else "scaled to a peak of 1"
    warnings.warn(f"{name}: samples reach {peak:.6g}, far outside [-1, 1]; {taken} (pass floats "
                  "in [-1, 1], or integer PCM as its integer type)", stacklevel=3)
    return array / scale


def _mix_down(array: torch.Tensor, name: str) -> torch.Tensor:
    """(frames, channels) or (channels, frames) -> mono: the shorter axis is the channels."""
    rows, columns = array.shape
    if rows == 1 or columns == 1:
        return array.reshape(-1)
    if min(rows, columns) > MAX_CHANNELS or rows == columns:
        raise AudioError(name, f"cannot tell the channels from the samples of a {rows} x "
                               f"{columns} array; pass (samples, channels) or (channels, "
                               f"samples) with at most {MAX_CHANNELS} channels")
    frames = array if rows > columns else array.T
    return torch.from_numpy(mono(frames.detach().cpu().numpy())).to(array.device, array.dtype)


def mono(block: np.ndarray) -> np.ndarray:
    """(frames, channels) -> (frames,): the channels' mean, or the loudest channel where the
    channels cancel in the mean (CANCEL_SHARE: one inverted, or out of phase)."""
    if block.shape[1] == 1:
        return block[:, 0]
    mean = block.mean(axis=1)
    rms = np.sqrt(np.square(block, dtype=np.float64).mean(axis=0))
    uncancelled = rms.mean() ** 2
    if uncancelled > 0 and np.square(mean, dtype=np.float64).mean() < CANCEL_SHARE * uncancelled:
        return block[:, int(rms.argmax())]
    return mean


def audio_duration(path: str | Path) -> float:
    """Duration in seconds from the header alone, without decoding the samples."""
    try:
        info = sf.info(str(path))
    except (sf.LibsndfileError, RuntimeError, TypeError, OSError) as err:
        raise AudioError(path, f"not readable as audio ({first_line(err)})") from None
    return info.frames / info.samplerate
