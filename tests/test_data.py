"""Manifests (NeMo convention, relative paths, clear errors), duration-bucketed batches and the
static shapes of compiled training."""

import json
import random
from collections import Counter

import pytest
import torch

from asr.audio import load_audio
from asr.data import (
    DurationBatchSampler,
    ManifestError,
    StaticShapes,
    bucket_batches,
    collate,
    padding_fraction,
    read_manifest,
)
from asr.features import FeatureConfig
from asr.model import ModelDimensions, SpeechTransformer
from helpers import fsdd_file

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_relative_paths_resolve_against_manifest_folder(tmp_path):
    (tmp_path / "sub" / "wavs").mkdir(parents=True)
    (tmp_path / "sub" / "wavs" / "a.wav").write_bytes(fsdd_file(2).read_bytes())
    manifest = write_lines(tmp_path / "sub" / "m.jsonl", [
        json.dumps({"audio_filepath": "wavs/a.wav", "text": "yes", "duration": 1.0}),
        "",
        json.dumps({"audio_filepath": str(fsdd_file(1)), "text": "one", "duration": 0.5}),
    ])
    utts = read_manifest(manifest)
    assert [u.audio_filepath for u in utts] == [str(tmp_path / "sub" / "wavs" / "a.wav"),
                                                str(fsdd_file(1))]
    assert [u.text for u in utts] == ["yes", "one"]


@pytest.mark.parametrize("line,problem", [
    ('{"audio_filepath": "a.wav", "text": "x"}', "missing key(s) duration"),
    ('{"audio_filepath": "a.wav"', "bad JSON (Expecting ',' delimiter)"),
    ('["a.wav", "x", 1]', "expected a JSON object"),
    ('{"audio_filepath": "a.wav", "text": "x", "duration": -1}',
     "duration must be a positive number, got -1"),
    ('{"audio_filepath": "a.wav", "text": 5, "duration": 1}', "text must be a string"),
])
def test_bad_lines_name_file_and_line(tmp_path, line, problem):
    good = json.dumps({"audio_filepath": str(fsdd_file(2)), "text": "two", "duration": 1})
    manifest = write_lines(tmp_path / "m.jsonl", [good, line])
    with pytest.raises(ManifestError) as caught:
        read_manifest(manifest)
    assert str(caught.value) == f"{manifest}:2: {problem}"
    assert len(read_manifest(manifest, on_error="skip")) == 1


def test_missing_and_non_utf8_manifests(tmp_path):
    with pytest.raises(ManifestError, match="manifest not found"):
        read_manifest(tmp_path / "none.jsonl")
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(b'{"audio_filepath": "a.wav", "text": "caf\xe9", "duration": 1}\n')
    with pytest.raises(ManifestError, match="not UTF-8 text"):
        read_manifest(bad)


def test_batches_cover_everything_once_and_respect_caps():
    durations = [0.5 + (i * 7 % 13) / 4 for i in range(100)]
    sampler = DurationBatchSampler(durations, batch_size=8, max_duration=12.0, seed=3)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(100))
    for batch in batches:
        assert len(batch) <= 8
        assert len(batch) == 1 or max(durations[i] for i in batch) * len(batch) <= 12.0
    sampler.set_epoch(1)
    assert list(sampler) != batches  # reshuffled per epoch
    sampler.set_epoch(0)
    assert list(sampler) == batches  # but reproducibly
    halves = [list(DurationBatchSampler(durations, 8, 12.0, seed=3, rank=r, world_size=2))
              for r in (0, 1)]
    assert not {tuple(b) for b in halves[0]} & {tuple(b) for b in halves[1]}


DURATIONS = [0.4 + (i * 37 % 101) / 20 for i in range(203)]  # 0.4-5.4 s, no two batches alike


def test_every_utterance_once_per_epoch_within_the_duration_cap():
    sampler = DurationBatchSampler(DURATIONS, batch_size=16, max_duration=20.0, seed=1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert sorted(i for b in batches for i in b) == list(range(len(DURATIONS)))
        assert all(max(DURATIONS[i] for i in b) * len(b) <= 20.0 for b in batches)
        assert len(batches) == len(sampler)


def test_duration_buckets_pad_less_than_random_batches():
    sampler = DurationBatchSampler(DURATIONS, batch_size=16, max_duration=20.0, seed=1)
    bucketed = padding_fraction(list(sampler), DURATIONS)
    order = random.Random(1).sample(range(len(DURATIONS)), len(DURATIONS))
    sizes = [len(b) for b in sampler]  # the same batch sizes, filled at random
    starts = [sum(sizes[:k]) for k in range(len(sizes))]
    shuffled = [order[s:s + n] for s, n in zip(starts, sizes, strict=True)]
    assert bucketed < 0.05 < 0.3 < padding_fraction(shuffled, DURATIONS)


def test_sortagrad_first_epoch_in_increasing_length_then_shuffled():
    sampler = DurationBatchSampler(DURATIONS, batch_size=16, max_duration=20.0, sortagrad=True)
    first = [max(DURATIONS[i] for i in b) for b in sampler]
    assert first == sorted(first)
    sampler.set_epoch(1)
    second = [max(DURATIONS[i] for i in b) for b in sampler]
    assert second != sorted(second) and sorted(second) == first


@pytest.mark.parametrize("world_size", [2, 3])
def test_ranks_share_one_shuffled_list_and_step_together(world_size):
    """Training: each rank the same number of batches, disjoint, all but < world_size of
    them used; evaluation: every batch on exactly one rank."""
    every = DurationBatchSampler(DURATIONS, 16, 20.0, seed=5)
    every.set_epoch(2)
    batches = [tuple(b) for b in every]
    shards = []
    for rank in range(world_size):
        sampler = DurationBatchSampler(DURATIONS, 16, 20.0, seed=5, rank=rank,
                                       world_size=world_size)
        sampler.set_epoch(2)
        shards.append([tuple(b) for b in sampler])
        assert len(shards[-1]) == len(sampler) == len(batches) // world_size
    used = [b for shard in shards for b in shard]
    assert len(set(used)) == len(used) and set(used) <= set(batches)
    assert len(batches) - len(used) == len(batches) % world_size
    assert [shard[k] for k in range(len(shards[0])) for shard in shards] == \
        batches[:len(used)]  # step k of the world = the next world_size batches of one list
    dev = [list(DurationBatchSampler(DURATIONS, 16, 20.0, shuffle=False, rank=rank,
                                     world_size=world_size, drop_last=False))
           for rank in range(world_size)]
    assert sorted(i for shard in dev for b in shard for i in b) == list(range(len(DURATIONS)))


def test_buckets_give_a_few_static_shapes_and_hear_everyone():
    """data.buckets: each bucket's batches hold the same count (so a compiled step sees a few
    shapes), every utterance is heard, a bucket's filling ones at most twice."""
    rng = random.Random(3)
    durations = [rng.uniform(0.4, 12.0) for _ in range(203)]
    batches, longest = bucket_batches(durations, 4, 16, 80.0)
    assert longest == sorted(longest) and longest[-1] == max(durations)
    sizes_by_bucket = {}
    for batch in batches:
        bucket = next(k for k, top in enumerate(longest) if max(durations[i] for i in batch) <= top)
        sizes_by_bucket.setdefault(bucket, set()).add(len(batch))
        assert len(set(batch)) == len(batch)
    assert all(len(sizes) == 1 for sizes in sizes_by_bucket.values()), sizes_by_bucket
    assert [sizes.pop() for _, sizes in sorted(sizes_by_bucket.items())] == [
        min(16, int(80.0 // top)) for top in longest]
    heard = Counter(i for batch in batches for i in batch)
    assert set(heard) == set(range(203)) and max(heard.values()) == 2
    sampler = DurationBatchSampler(durations, 16, 80.0, seed=1, buckets=4)
    assert sorted(map(sorted, sampler)) == sorted(map(sorted, batches))


def test_static_shapes_pad_to_the_buckets_and_leave_the_loss_as_it_was():
    """Padding a batch to its bucket's length and its tokens to a multiple of 16 changes no
    loss (to fp32 rounding): the model masks every padded frame and token."""
    waves = [load_audio(fsdd_file(d, "jackson"), 16000) for d in (3, 7, 8)]
    items = [(wave, torch.tensor(ids)) for wave, ids in
             zip(waves, ([5, 6, 7, 8], [9, 10], [11]), strict=True)]
    shapes = StaticShapes((8000, 16000, 24000), token_multiple=16)
    dynamic, static = collate(items), collate(items, shapes)
    assert static["wave"].shape == (3, shapes.wave_length(dynamic["wave"].shape[1]))
    assert static["wave"].shape[1] in shapes.samples and static["tokens"].shape == (3, 16)
    assert torch.equal(static["lengths"], dynamic["lengths"])
    assert shapes.wave_length(24001) == 48000 and shapes.token_length(0) == 16
    torch.manual_seed(0)
    for subsampling in ("conv2d", "stack"):
        dims = ModelDimensions(n_vocab=16, d_model=32, d_ff=64, n_head=2, n_encoder_layers=2,
                               n_decoder_layers=1, subsampling=subsampling, ctc_weight=0.5)
        model = SpeechTransformer(dims, FeatureConfig(utterance_cmn=True)).eval()
        a = model(dynamic["wave"], dynamic["lengths"], dynamic["tokens"])
        b = model(static["wave"], static["lengths"], static["tokens"])
        for name in ("att", "ctc", "loss"):
            assert torch.allclose(a[name], b[name], rtol=1e-5), (subsampling, name, a, b)
