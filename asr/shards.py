"""Large corpora as WebDataset shards: tar files of (audio, transcript) read front to back.

A corpus of a million short files costs a million random reads per epoch (slow on network
file systems and object stores); shards of ~1000 utterances each are read sequentially, and a
training process holds only the utterances of its shuffle buffer, never the corpus.

    python -m tools.write_shards --manifest data/librispeech/train.jsonl --out data/librispeech/shards
    python -m asr.train ... data.train_shards=data/librispeech/shards

WebDataset (rather than Lhotse Shar) because its shards are plain POSIX tar files that any
tool lists and unpacks, and it is one small pure-Python dependency; Lhotse would bring its own
manifest and cut model beside `asr.data`'s. Each sample is `KEY.audio` (the original file's
bytes, any format soundfile reads) and `KEY.json` (text, duration, source path). A shard set
is complete when its index `shards.json` exists: it is written (atomically) after the last
shard has been renamed into place.

Training from shards (`ShardBatches`) streams duration-bucketed batches: utterances fill a
shuffle buffer, which is sorted and cut by `asr.data`'s batching rule (count and padded-seconds
caps), and the batches leave in random order. An epoch is a fixed number of batches (as many
as the manifest's utterances make), drawn from shards chosen at random with replacement
(WebDataset's resampled mode): every rank and DataLoader worker can always deliver its share,
so DDP ranks never wait on a peer that ran dry. The price: each utterance is seen once per
epoch only on average, and a resumed run restarts its epoch's stream (not bit-exact).
"""

import io
import json
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path

import soundfile as sf
import torch
from torch.utils.data import IterableDataset, get_worker_info

from asr.audio import AudioError, prepare_array
from asr.checkpoint import save_text
from asr.data import _make_batches, collate, iter_manifest
from asr.progress import progress
from asr.tokenizer import Tokenizer

INDEX = "shards.json"
PATTERN = "shard-%06d.tar"


def _webdataset():
    """The optional dependency (`pip install -e '.[shards]'`), imported only when shards are used."""
    try:
        import webdataset
    except ImportError:
        raise ImportError("shards need the webdataset package: pip install -e '.[shards]'") from None
    return webdataset


def write_shards(manifest: Path, out: Path, max_count: int = 1000) -> dict:
    """Pack a manifest's utterances into OUT/shard-NNNNNN.tar (at most `max_count` each) and
    write OUT/shards.json; the manifest is streamed, never held. Returns the index."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out, prefix=".staging-"))
    try:
        counts: list[int] = []
        seconds: list[float] = []
        with _webdataset().ShardWriter(str(staging / PATTERN), maxcount=max_count, verbose=0) as sink:
            for number, utt in enumerate(progress(iter_manifest(manifest), "writing shards",
                                                  unit="utt")):
                if number // max_count == len(counts):
                    counts.append(0)
                    seconds.append(0.0)
                sink.write({"__key__": f"{number:09d}", "audio": Path(utt.audio_filepath).read_bytes(),
                            "json": {"text": utt.text, "duration": utt.duration,
                                     "source": utt.audio_filepath}})
                counts[-1] += 1
                seconds[-1] += utt.duration
        shards = [{"name": PATTERN % k, "utterances": n, "seconds": round(s, 3)}
                  for k, (n, s) in enumerate(zip(counts, seconds, strict=True))]
        for shard in shards:
            (staging / shard["name"]).replace(out / shard["name"])
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    index = {"manifest": str(manifest), "utterances": sum(counts),
             "seconds": round(sum(seconds), 3), "shards": shards}
    save_text(json.dumps(index, indent=1) + "\n", out / INDEX)
    return index


def read_index(folder: Path) -> dict:
    """A complete shard set's index; ValueError naming the folder otherwise."""
    path = Path(folder) / INDEX
    try:
        index = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{path}: no shard index (an unfinished or missing shard set; write it "
                         "with tools/write_shards.py)") from None
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: not a shard index ({err})") from None
    missing = [s["name"] for s in index["shards"] if not (path.parent / s["name"]).is_file()]
    if missing:
        raise ValueError(f"{path.parent}: missing shard(s) {', '.join(missing[:3])}")
    return index


def decode_sample(sample: dict, sample_rate: int) -> tuple[torch.Tensor, str, float]:
    """A shard sample -> (waveform at `sample_rate`, text, duration); AudioError naming the
    shard and key if its audio cannot be used."""
    name = f"{sample.get('__url__', '?')}:{sample['__key__']}"
    meta = json.loads(sample["json"])
    try:
        samples, rate = sf.read(io.BytesIO(sample["audio"]), dtype="float32")
    except (sf.LibsndfileError, RuntimeError, TypeError) as err:
        raise AudioError(name, f"not a readable audio file ({err})") from None
    return prepare_array(samples, rate, sample_rate, name), meta["text"], meta["duration"]


class ShardBatches(IterableDataset):
    """Duration-bucketed training batches streamed from a shard set (see the module's doc).

    Use with `DataLoader(batch_size=None)`; `set_epoch` before each epoch, as with
    `asr.data.DurationBatchSampler` (a resumed run passes the batches already done)."""

    def __init__(self, folder: Path, tokenizer: Tokenizer, sample_rate: int, batches: int,
                 batch_size: int, max_duration: float | None, seed: int = 0, rank: int = 0,
                 buffer: int = 500, augment: Callable[[torch.Tensor], torch.Tensor] | None = None):
        self.urls = [str(Path(folder) / s["name"]) for s in read_index(folder)["shards"]]
        self.tokenizer, self.sample_rate, self.augment = tokenizer, sample_rate, augment
        self.batches, self.batch_size, self.max_duration = batches, batch_size, max_duration
        self.seed, self.rank, self.buffer = seed, rank, buffer
        self.epoch, self.start = 0, 0

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        self.epoch, self.start = epoch, start

    def __len__(self) -> int:
        return self.batches

    def __iter__(self) -> Iterator[dict]:
        worker = get_worker_info()
        wid, workers = (worker.id, worker.num_workers) if worker else (0, 1)
        # each (rank, worker, epoch, position) draws its own shards; workers split the batches
        rng = random.Random(f"{self.seed}:{self.epoch}:{self.start}:{self.rank}:{wid}")
        yield from islice(self._stream(rng), len(range(wid, self.batches - self.start, workers)))

    def _stream(self, rng: random.Random) -> Iterator[dict]:
        buffer: list = []
        for item in self._items(rng):
            buffer.append(item)
            if len(buffer) == self.buffer:
                yield from self._cut(buffer, rng)
                buffer = []

    def _items(self, rng: random.Random) -> Iterator[tuple]:
        """Endless: shards drawn with replacement, each read front to back."""
        while True:
            for sample in _webdataset().WebDataset(rng.choice(self.urls), shardshuffle=False):
                try:
                    wave, text, duration = decode_sample(sample, self.sample_rate)
                except AudioError as err:  # the training loop applies data.on_error
                    yield str(err), 0.0
                    continue
                if self.augment is not None:
                    wave = self.augment(wave)
                tokens = torch.tensor(self.tokenizer.encode(text), dtype=torch.long)
                yield (wave, tokens), duration

    def _cut(self, items: list[tuple], rng: random.Random) -> Iterator[dict]:
        batches = _make_batches([d for _, d in items], self.batch_size, self.max_duration)
        rng.shuffle(batches)
        for batch in batches:
            yield collate([items[i][0] for i in batch])
