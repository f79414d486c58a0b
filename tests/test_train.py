"""Training end to end on real speech: the loss falls and the model transcribes what it learnt."""

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import soundfile as sf
import torch
from omegaconf import OmegaConf

from asr.checkpoint import CHECKPOINT, load_model_dir, load_torch
from asr.train import clip_gradients
from asr.transcriber import Transcriber
from helpers import ROOT, small_real_set, train_config, write_manifest

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]


def test_tiny_model_overfits_real_utterances(overfit_model):
    model_dir, entries, run = overfit_model
    losses = [epoch["train_loss"] for epoch in run["history"]]
    assert losses[-1] < 0.2 * losses[0]
    assert run["history"][-1]["dev_wer"] == 0.0
    transcriber = Transcriber.from_pretrained(model_dir, device="cpu")
    results = transcriber.transcribe([path for path, _ in entries])
    assert [r.text for r in results] == [t for _, t in entries]


def test_model_directory_round_trip(overfit_model):
    """CMVN statistics and the tokenizer come back from disk exactly as trained."""
    model_dir, _, _ = overfit_model
    model, tokenizer, config = load_model_dir(model_dir)
    weights = torch.load(model_dir / "model.pt", weights_only=True)
    assert torch.equal(model.frontend.cmvn_mean, weights["frontend.cmvn_mean"])
    assert not torch.allclose(model.frontend.cmvn_std, torch.ones_like(model.frontend.cmvn_std))
    assert tokenizer.decode(tokenizer.encode("Seven, yes!")) == "seven yes"
    assert config.model.n_vocab == tokenizer.vocab_size


@pytest.mark.subprocess
def test_train_cli_and_resume(tmp_path):
    """`python -m asr.train` runs with Hydra overrides; resume continues to the same end."""
    manifest = write_manifest(tmp_path / "train.jsonl", small_real_set()[:4])
    out = tmp_path / "run"
    args = [sys.executable, "-m", "asr.train", f"data.train_manifest={manifest}",
            f"data.dev_manifest={manifest}", f"trainer.out_dir={out}", "model=tiny",
            "tokenizer.vocab_size=30", "trainer.progress=false", "trainer.num_threads=1"]
    first = subprocess.run([*args, "trainer.max_epochs=2"], cwd=ROOT, capture_output=True,
                           text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "epoch 2:" in first.stdout
    # after epoch 1, a plain line (the output is piped) with the speed and the expected end
    assert re.search(r"epoch 1: .*\nspeed: \d+ audio s/s, \d+ s/epoch \(\d+ s of it dev scoring\); "
                     r"end expected at \d\d:\d\d \(in [\d.]+ min\), after epoch 2 of 2\n",
                     first.stdout), first.stdout
    assert load_torch(out / CHECKPOINT)["state"]["epoch"] == 2
    second = subprocess.run([*args, "trainer.max_epochs=3", "trainer.resume=true"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert "resumed from" in second.stdout and "epoch 3:" in second.stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert [e["epoch"] for e in metrics["epochs"]] == [1, 2, 3]
    # the hours heard count every epoch, the resumed one too; from scratch they are all heard
    seconds = sum(sf.info(str(path)).duration for path, _ in small_real_set()[:4])
    assert metrics["corpus_train_hours"] == pytest.approx(seconds / 3600, abs=1e-6)
    assert metrics["audio_hours_heard"] == pytest.approx(3 * seconds / 3600, abs=1e-6)
    assert metrics["total_audio_hours_heard"] == metrics["audio_hours_heard"]


@pytest.mark.subprocess
def test_time_budget_ends_the_run_cleanly(tmp_path):
    """`trainer.max_minutes`: a run of far more epochs than 3 s hold stops between steps at the
    budget, scores the weights it stopped with, keeps the best and averaged models and a state
    to resume from, and says so in one line; resumed with its budget spent, it trains no more."""
    entries = small_real_set()
    train = write_manifest(tmp_path / "train.jsonl", entries * 8)  # 32 steps an epoch
    dev = write_manifest(tmp_path / "dev.jsonl", entries)
    out = tmp_path / "run"
    args = [sys.executable, "-m", "asr.train", f"data.train_manifest={train}",
            f"data.dev_manifest={dev}", f"trainer.out_dir={out}", "model=tiny",
            "tokenizer.vocab_size=30", "trainer.progress=false", "trainer.num_threads=1",
            "data.batch_size=2", "trainer.max_epochs=1000", "trainer.max_minutes=0.05",
            "trainer.average_checkpoints=2", "scheduler=cosine", "scheduler.warmup_steps=5"]
    run = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    stop = re.search(r"stopped at the budget \(trainer.max_minutes=0.05\) after (\d+) of 1000 "
                     r"epochs( \(epoch \d+ cut at batch \d+ of 32\))?, step (\d+)", run.stdout)
    assert stop, run.stdout
    epochs, steps = int(stop[1]), int(stop[3])
    metrics = json.loads((out / "metrics.json").read_text())
    assert len(metrics["epochs"]) == epochs and metrics["steps"] == steps
    assert metrics["stopped_by_budget"] is True and metrics["max_epochs"] == 1000
    state = load_torch(out / CHECKPOINT)["state"]
    assert state["epoch"] == epochs and 0 < state["run_seconds"]
    # The best epoch's model and the averaged one load and decode. What they write is not
    # checked: on a loaded machine 3 s are a few steps, and such a model may write nothing.
    for model_dir in (out, out / "averaged"):
        transcript = Transcriber.from_pretrained(model_dir, device="cpu").transcribe(entries[0][0])
        assert isinstance(transcript.text, str)
    again = subprocess.run([*args, "trainer.resume=true"], cwd=ROOT, capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"after {epochs} of 1000 epochs, step {steps}" in again.stdout
    assert f"epoch {epochs + 1}:" not in again.stdout


@pytest.mark.train
def test_resume_matches_uninterrupted_run(tmp_path):
    """Stopping after one epoch and resuming gives the same weights as training straight on,
    from a checkpoint saved with separate query, key and value layers too."""
    from asr.train import Trainer

    manifest = write_manifest(tmp_path / "train.jsonl", small_real_set()[:4])
    common = ["tokenizer.vocab_size=30", "data.batch_size=2"]
    straight = Trainer(train_config(tmp_path / "a", manifest, "trainer.max_epochs=2", *common))
    straight.fit()
    Trainer(train_config(tmp_path / "b", manifest, "trainer.max_epochs=1", *common)).fit()
    shutil.copytree(tmp_path / "b", tmp_path / "c")
    checkpoint = tmp_path / "c" / "model" / CHECKPOINT
    torch.save(separate_layout(load_torch(checkpoint), straight.model), checkpoint)
    for run in ("b", "c"):
        resumed = Trainer(train_config(tmp_path / run, manifest, "trainer.max_epochs=2",
                                       "trainer.resume=true", *common))
        resumed.fit()
        for (name, a), b in zip(straight.model.state_dict().items(),
                                resumed.model.state_dict().values(), strict=True):
            assert torch.allclose(a, b, atol=1e-6), (run, name)


def separate_layout(ckpt: dict, model: torch.nn.Module) -> dict:
    """`ckpt` as it was saved before attention packed its projections (weights format 1, no
    version key): separate query, key and value layers, each a weight then a bias, in the
    model's order and in the optimiser's."""
    weights, moments = {}, {}
    params = dict(model.named_parameters())
    states = dict(zip(params, (ckpt["optimizer"]["state"][i] for i in range(len(params))),
                      strict=True))
    for name, value in ckpt["model"].items():
        parts = separate_names(name)
        if len(parts) == 1:
            weights[name], moments[name] = value, states.get(name)
        elif name.endswith(".weight"):  # a packed weight: each part's weight, then its bias
            bias = name.removesuffix("weight") + "bias"
            for i, pair in enumerate(zip(parts, separate_names(bias), strict=True)):
                for key, source in zip(pair, (name, bias), strict=True):
                    weights[key] = ckpt["model"][source].chunk(len(parts))[i]
                    moments[key] = {k: v.chunk(len(parts))[i] if v.dim() else v
                                    for k, v in states[source].items()}
    kept = [name for name in weights if moments.get(name) is not None]
    optimizer = {"state": {i: moments[name] for i, name in enumerate(kept)},
                 "param_groups": [{**ckpt["optimizer"]["param_groups"][0],
                                   "params": list(range(len(kept)))}]}
    old = {key: value for key, value in ckpt.items() if key != "format"}
    return {**old, "model": weights, "optimizer": optimizer}


def separate_names(name: str) -> list[str]:
    """A packed projection's parameter as format 1 named its parts: "x.qkv.bias" ->
    "x.query.bias", "x.key.bias", "x.value.bias"; any other name alone."""
    head, _, kind = name.rpartition(".")
    prefix, _, layer = head.rpartition(".")
    parts = {"qkv": ("query", "key", "value"), "kv": ("key", "value")}.get(layer)
    return [f"{prefix}.{part}.{kind}" for part in parts] if parts else [name]


def test_fine_tuning_starts_from_the_trained_model(overfit_model, tmp_path):
    """`trainer.init_from`: the run starts with the model's weights, CMVN and tokenizer, so it
    transcribes what that model learnt before taking a step; a fresh start knows nothing."""
    from asr.train import Trainer

    model_dir, _, run = overfit_model
    pretrained, tokenizer, _ = load_model_dir(model_dir)
    common = ["optim.lr=1e-9", "trainer.max_epochs=1", "data.batch_size=8",
              "features.freq_masks=0", "features.time_masks=0"]
    tuned = Trainer(train_config(tmp_path / "tuned", run["manifest"], *common,
                                 f"trainer.init_from={model_dir}"))
    assert tuned.tokenizer.model_proto == tokenizer.model_proto
    for name, tensor in pretrained.state_dict().items():
        assert torch.equal(tuned.model.state_dict()[name], tensor), name
    assert tuned.fit().history[0]["dev_wer"] == 0.0
    # what it heard in all adds its own hours to what the model it started from had heard
    before = json.loads((model_dir / "metrics.json").read_text())["total_audio_hours_heard"]
    heard = json.loads((tmp_path / "tuned" / "model" / "metrics.json").read_text())
    assert before > 0 and heard["audio_hours_heard"] > 0
    assert heard["total_audio_hours_heard"] == pytest.approx(before + heard["audio_hours_heard"],
                                                             abs=2e-6)
    fresh = Trainer(train_config(tmp_path / "fresh", run["manifest"], *common)).fit()
    assert fresh.history[0]["dev_wer"] >= 0.9


def test_hours_heard_by_the_weights_started_from_are_a_number_or_unknown(overfit_model, tmp_path,
                                                                         caplog):
    """A model directory's record of what its weights heard (a shipped model's TRAINING.json
    before training's metrics.json) is untrusted: anything but a number of hours is unknown,
    and a run that starts from such weights says its total is not known."""
    from asr.models import FOLDER
    from asr.train import Trainer
    from asr.training.pretrained import hours_heard

    model_dir, _, run = overfit_model
    copied = tmp_path / "copied"
    shutil.copytree(model_dir, copied, ignore=shutil.ignore_patterns("metrics.json", "*.pt"))
    assert hours_heard(str(copied)) is None
    (copied / "metrics.json").write_text(json.dumps({"total_audio_hours_heard": 3.5}))
    assert hours_heard(str(copied)) == 3.5
    (copied / "TRAINING.json").write_text(json.dumps({"total_audio_hours_heard": 742.3}))
    assert hours_heard(str(copied)) == 742.3
    for bad in ('{"total_audio_hours_heard": true}', '{"total_audio_hours_heard": -1}',
                '{"total_audio_hours_heard": "9"}', '{"total_audio_hours_heard": Infinity}',
                "[1, 2]", "not json"):
        (copied / "TRAINING.json").write_text(bad)
        assert hours_heard(str(copied)) is None, bad
    shipped = json.loads((FOLDER / "base" / "TRAINING.json").read_text())
    assert hours_heard("base") == shipped["total_audio_hours_heard"] > 0
    shutil.copyfile(model_dir / "model.pt", copied / "model.pt")
    tuned = Trainer(train_config(tmp_path / "tuned", run["manifest"], "trainer.max_epochs=1",
                                 f"trainer.init_from={copied}"))
    assert tuned.state.heard_before_hours is None
    assert f"trainer.init_from={copied}: no record of the hours of audio its weights heard " \
           "(total_audio_hours_heard in TRAINING.json or metrics.json), so this run's " \
           "total_audio_hours_heard is not known" in caplog.text


def test_fine_tuning_refuses_what_does_not_fit(overfit_model, tmp_path):
    """One-line errors for a network, front end, CTC head or alphabet the weights cannot serve."""
    from asr.train import Trainer, TrainingError

    model_dir, entries, run = overfit_model
    quiz = write_manifest(tmp_path / "quiz.jsonl", [(entries[0][0], "quiz"), *entries[1:]])
    cases = [
        ([run["manifest"], "model.stack=6"],
         f"trainer.init_from={model_dir}: model.stack is 4 there, 6 here; pass model.stack=4 "
         "(the network must be the one the weights were trained as)"),
        ([run["manifest"], "features.n_mels=40"],
         f"trainer.init_from={model_dir}: features.n_mels is 80 there, 40 here; pass "
         "features.n_mels=80 (the network must be the one the weights were trained as)"),
        ([run["manifest"], "model.ctc_weight=0"],
         f"trainer.init_from={model_dir}: model.ctc_weight must be > 0, as there (the CTC head "
         "is part of the weights)"),
        ([quiz], f"trainer.init_from={model_dir}: its tokenizer cannot spell 'q' 'z' of the "
                 "training transcripts"),
    ]
    for (manifest, *overrides), message in cases:
        cfg = train_config(tmp_path, manifest, f"trainer.init_from={model_dir}", *overrides)
        with pytest.raises(TrainingError) as err:
            Trainer(cfg)
        assert str(err.value) == message
    cfg = train_config(tmp_path, run["manifest"], f"trainer.init_from={tmp_path / 'none'}")
    with pytest.raises(TrainingError, match=r"^trainer.init_from: .*none: not a model directory$"):
        Trainer(cfg)


def test_network_overrides_make_any_model_directory_fit(overfit_model, tmp_path, capsys):
    """`python -m asr.training.pretrained DIR` prints the model's network and front end as
    overrides: a run configured otherwise (stack 6, 40 mels) fits once they follow; an unreadable
    directory is one error line."""
    from asr.train import Trainer
    from asr.training.pretrained import main

    model_dir, _, run = overfit_model
    main([str(model_dir)])
    printed = capsys.readouterr().out.splitlines()
    assert {"model.stack=4", "features.n_mels=80", "model.subsampling=stack"} <= set(printed)
    assert not any(line.startswith(("model.dropout=", "features.freq_masks=")) for line in printed)
    cfg = train_config(tmp_path, run["manifest"], "model.stack=6", "features.n_mels=40",
                       *printed, f"trainer.init_from={model_dir}")
    assert Trainer(cfg).model.dims.stack == 4
    with pytest.raises(SystemExit) as err:
        main([str(tmp_path / "none")])
    assert re.fullmatch(r"error: trainer.init_from: .*none: not a model directory", str(err.value))


def test_fine_tuning_checks_settings_newer_than_the_model(overfit_model, tmp_path):
    """A model saved before `features.utterance_cmn` existed was built without it: turning it
    on for the fine-tuning is refused as any other front-end change is."""
    from asr.train import Trainer, TrainingError

    model_dir, _, run = overfit_model
    old = tmp_path / "old_model"
    shutil.copytree(model_dir, old)
    config = OmegaConf.load(old / "config.yaml")
    del config.features["utterance_cmn"]
    OmegaConf.save(config, old / "config.yaml")
    cfg = train_config(tmp_path, run["manifest"], f"trainer.init_from={old}",
                       "features.utterance_cmn=true")
    with pytest.raises(TrainingError, match=r"features.utterance_cmn is False there, True here"):
        Trainer(cfg)


def test_clip_gradients_scales_only_when_over_the_limit():
    """Over the limit, the gradients end with total norm max_norm, as clip_grad_norm_ leaves
    them; under it they are untouched. Either way the returned norm is the norm before."""
    weights = [torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(2, 2)),
               torch.nn.Parameter(torch.zeros(1))]  # the last has no gradient
    weights[0].grad = torch.tensor([3.0, 0.0, 4.0])
    weights[1].grad = torch.tensor([[0.0, 12.0], [0.0, 0.0]])  # total norm 13
    norm = clip_gradients(weights, 6.5)
    assert norm.item() == 13.0
    assert torch.allclose(weights[0].grad, torch.tensor([1.5, 0.0, 2.0]))  # scaled by 6.5 / (13 + 1e-6)
    assert torch.allclose(weights[1].grad, torch.tensor([[0.0, 6.0], [0.0, 0.0]]))
    assert weights[2].grad is None
    before = [w.grad.clone() for w in weights[:2]]
    norm = clip_gradients(weights, 7.0)  # under the limit: nothing changes, bit for bit
    assert norm.item() == pytest.approx(6.5)
    assert all(torch.equal(w.grad, b) for w, b in zip(weights, before, strict=False))


@pytest.mark.parametrize(("max_steps", "ends"), [
    (None, "after epoch 3 of 3"),
    (30, "at step 30 (trainer.max_steps), about 1.3 of 3 epochs in"),
])
def test_the_forecast_names_what_ends_the_run(caplog, max_steps, ends):
    """After epoch 1 of a run of 23-step epochs, at 0.1 s a step and 0.5 s a dev evaluation:
    its end comes with its last epoch, or earlier with trainer.max_steps, and the line says
    which (a step budget in a run of many epochs once read "after epoch 100000 of 100000")."""
    from asr.training.budget import Clock, Plan
    from asr.training.report import Report

    clock = Clock(Plan(3, max_steps, 23, dev_batches=2, final_evals=1, limit=None), before=0.0,
                  now=lambda: 0.0)
    for _ in range(23):
        clock.stepped(0.1)
    clock.evaluated(0.5)
    forecast = clock.forecast(step=23, epoch=1)
    with caplog.at_level("INFO", logger="asr.train"):
        Report(True, False).forecast(forecast, 100.0, 3, None, max_steps)
    left = 46 * 0.1 + 2 * 0.5 if max_steps is None else 7 * 0.1 + 0.5
    assert forecast.left == pytest.approx(left)
    assert caplog.messages[-1].endswith(f"(in {left / 60:.1f} min), {ends}")


def hear_ctrl_c() -> None:
    """The child's SIGINT as in a terminal: a suite started in the background (`&`) passes
    SIGINT on ignored, and Python then keeps ignoring it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.subprocess
def test_ctrl_c_ends_training_in_one_line_with_status_130(tmp_path):
    """SIGINT mid-run: no traceback, a line that says how to continue, the shell's status 130."""
    entries = small_real_set()
    train = write_manifest(tmp_path / "train.jsonl", entries * 8)
    out = tmp_path / "run"
    run = subprocess.Popen([sys.executable, "-m", "asr.train", f"data.train_manifest={train}",
                            f"data.dev_manifest={train}", f"trainer.out_dir={out}", "model=tiny",
                            "tokenizer.vocab_size=30", "trainer.progress=false",
                            "trainer.num_threads=1", "data.batch_size=2", "trainer.max_epochs=1000"],
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           preexec_fn=hear_ctrl_c)
    deadline = time.monotonic() + 120
    while not (out / CHECKPOINT).is_file() and time.monotonic() < deadline:  # training has started
        time.sleep(0.2)
    time.sleep(1)
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=300)
    assert run.returncode == 130 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == ("interrupted: continue with the same command and "
                                            f"trainer.resume=true (from {out}/checkpoint.pt)")


def test_compiled_training_on_cuda_turns_loop_reindexing_off_or_is_refused_at_once(
        monkeypatch: pytest.MonkeyPatch):
    """Inductor's loop reindexing fails on the training step on CUDA after minutes of compiling
    (pytorch/pytorch#197077): the compile turns it off, and a torch without that switch is
    refused at once there; the CPU compiles either way."""
    import torch._inductor.config as inductor

    from asr.training import options
    from asr.training.options import TrainingError, check_compile, inductor_options

    assert inductor_options() == {"loop_reindexing_after_fusion": False}
    assert inductor_options("reduce-overhead") == {"triton.cudagraphs": True,
                                                   "loop_reindexing_after_fusion": False}
    assert inductor.loop_reindexing_after_fusion  # the option is the compile's, not global
    check_compile(True, torch.device("cuda"))
    monkeypatch.setattr(options, "REINDEXING", "no_such_switch")  # an older torch
    assert inductor_options() == {}  # the mode's settings alone
    check_compile(True, torch.device("cpu"))
    check_compile(False, torch.device("cuda"))
    with pytest.raises(TrainingError, match="^trainer.compile=true does not work on CUDA with "
                                            "this torch: its Inductor has no no_such_switch"):
        check_compile(True, torch.device("cuda"))


@pytest.mark.train
def test_compiled_training_on_buckets_builds_one_graph_per_static_shape(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """data.buckets with trainer.compile: the encoder and the decoder are compiled for static
    shapes (a graph per bucket, and per bucket and token width, never per batch) and train:
    the loss falls. Dynamo and AOTAutograd trace them as on a GPU; a recording backend stands
    for Inductor's minutes of C++ compiling."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    from asr.train import Trainer

    shapes: list[tuple] = []

    def recording(graph: torch.fx.GraphModule, inputs: list) -> object:
        shapes.append(tuple(tuple(x.shape) for x in inputs if isinstance(x, torch.Tensor)))
        return aot_autograd(fw_compiler=lambda g, _: make_boxed_func(g.forward))(graph, inputs)

    original = torch.compile

    def compile_recording(model: torch.nn.Module, **options: object) -> torch.nn.Module:
        assert options["dynamic"] is False
        assert options["options"]["loop_reindexing_after_fusion"] is False
        options.pop("options")
        return original(model, backend=recording, **options)

    monkeypatch.setattr(torch, "compile", compile_recording)
    entries = small_real_set() * 3
    manifest = write_manifest(tmp_path / "train.jsonl", entries)
    cfg = train_config(tmp_path, manifest, "trainer.max_epochs=6", "tokenizer.vocab_size=30",
                       "data.batch_size=4", "data.buckets=2", "trainer.compile=true",
                       "scheduler.warmup_steps=5", "optim.lr=3e-3")
    state = Trainer(cfg).fit()
    losses = [epoch["train_loss"] for epoch in state.history]
    assert losses[-1] < 0.8 * losses[0], losses
    assert state.step == 6 * 6  # 24 utterances in two buckets of 12: three batches of 4 each
    waves = {graph[0] for graph in shapes if len(graph[0]) == 3}  # the encoder's features
    assert len(waves) == 2 and len(shapes) <= 2 + 2 * 2, shapes  # + buckets x token widths
    saved = torch.load(tmp_path / "model" / "model.pt", weights_only=True)
    assert not [name for name in saved if "_orig_mod" in name]  # in place: the names stay
