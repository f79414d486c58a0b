"""The config schema (asr/config.py): every experiment composes and builds the dataclasses the
library reads; a misspelt key or a wrong type fails when Hydra composes; the group files state
only what differs from their dataclass."""

import shutil
from dataclasses import asdict
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, ValidationError

from asr import CONF_DIR
from asr.config import SCHEMAS, DataConfig, TrainerConfig, register_configs
from asr.decoding import DecodingOptions
from asr.features import FeatureConfig
from asr.model import ModelDimensions

pytestmark = pytest.mark.tier("fast")

EXPERIMENTS = sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))


def composed(*overrides: str, conf: Path = CONF_DIR):
    register_configs()
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        return compose("train", overrides=list(overrides))


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_builds_the_librarys_dataclasses(name):
    cfg = composed(f"experiment={name}", "trainer.out_dir=exp/x")
    cfg.model.n_vocab = 100  # training fills it in from the tokenizer
    built = OmegaConf.to_object(cfg)  # each section's dataclass, its own checks run
    assert isinstance(built["model"], ModelDimensions)
    assert isinstance(built["features"], FeatureConfig)
    assert isinstance(built["decode"], DecodingOptions)
    assert isinstance(built["data"], DataConfig) and isinstance(built["trainer"], TrainerConfig)
    assert built["data"].root and OmegaConf.select(cfg, "scheduler._target_")


def test_library_defaults_name_no_recipe_folder():
    """Where data and models live is the run's: the experiments and run.sh scripts say it."""
    def strings(node: object) -> list[str]:
        if isinstance(node, dict):
            return [s for value in node.values() for s in strings(value)]
        return [node] if isinstance(node, str) else []
    defaults = [OmegaConf.to_container(OmegaConf.structured(schema))
                for schemas in SCHEMAS.values() for schema in schemas.values()]
    found = [s for d in defaults for s in strings(d) if s.startswith(("data/", "exp/"))]
    assert found == []
    assert OmegaConf.is_missing(OmegaConf.structured(TrainerConfig), "out_dir")


def test_experiments_state_the_recipes_settings():
    fsdd = composed("experiment=fsdd_finetune_alone")
    assert fsdd.trainer.init_from == "exp/voice_commands_synthetic" and fsdd.data.root == "data/fsdd"
    assert fsdd.data.augment.speed.enabled and not fsdd.data.augment.narrowband.enabled
    cathy = composed("experiment=cathy")
    assert cathy.scheduler._target_ == "asr.scheduler.warmup_cosine" and cathy.features.freq_masks == 2
    assert composed("experiment=voice_commands_synthetic").model.subsampling == "conv2d"


def with_file(tmp_path: Path, name: str, text: str) -> Path:
    """A copy of conf/ with one more config file."""
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    (conf / name).write_text(text)
    return conf


@pytest.mark.parametrize("name,text,error", [
    ("experiment/typo.yaml", "# @package _global_\nmodel:\n  d_modle: 64\n", "d_modle"),
    ("decode/typo.yaml", "defaults:\n  - base_decode\n  - _self_\nbeam_sise: 3\n", "beam_sise"),
    ("decode/typo.yaml", "defaults:\n  - base_decode\n  - _self_\nbeam_size: five\n", "five"),
    ("trainer/typo.yaml", "defaults:\n  - base_trainer\n  - _self_\nmax_epoch: 3\n", "max_epoch"),
])
def test_a_misspelt_key_or_a_wrong_type_fails_to_compose(tmp_path, name, text, error):
    group, stem = name.split("/")[0], Path(name).stem
    conf = with_file(tmp_path, name, text)
    with pytest.raises((ConfigCompositionException, ConfigKeyError, ValidationError), match=error):
        composed(f"{group}={stem}", conf=conf)


def test_a_misspelt_override_fails_too():
    with pytest.raises(ConfigCompositionException):
        composed("decode.beam_sise=3")
    with pytest.raises(ConfigCompositionException):
        composed("trainer.max_epochs=many")


@pytest.mark.parametrize("group,schema", [
    ("decode", DecodingOptions), ("features", FeatureConfig), ("trainer", TrainerConfig)])
def test_group_files_differ_from_their_dataclass_only_in_what_they_state(group, schema):
    for path in sorted((CONF_DIR / group).glob("*.yaml")):
        stated = yaml.safe_load(path.read_text()) or {}
        stated.pop("defaults", None)
        cfg = OmegaConf.to_container(composed(f"{group}={path.stem}")[group], resolve=True)
        expected = {**asdict(schema()), **stated}
        assert cfg == expected, path.name


def test_beam_and_greedy_state_only_their_differences():
    defaults = asdict(DecodingOptions())
    for name, differences in (("beam", {"beam_size": 5, "ctc_weight": 0.5}), ("greedy", {})):
        cfg = OmegaConf.to_container(composed(f"decode={name}").decode)
        assert {k: v for k, v in cfg.items() if defaults[k] != v} == differences
        stated = yaml.safe_load((CONF_DIR / "decode" / f"{name}.yaml").read_text())
        assert set(stated) - {"defaults"} == set(differences)


@pytest.mark.parametrize("name", [e for e in EXPERIMENTS if "finetune" in e])
def test_a_finetune_experiment_has_its_starts_front_end_and_network(name):
    """A start that is a packaged model (base) is checked against its weights, as training
    checks it; one that is another experiment's run against that experiment."""
    from asr.models import NAMES
    from asr.training.pretrained import fixed_settings, load

    tuned = composed(f"experiment={name}")
    if tuned.trainer.init_from in NAMES:
        model, _ = load(tuned.trainer.init_from)
        assert [(section, key, tuned[section][key]) for section, key, _ in
                fixed_settings(model)] == fixed_settings(model)
        return
    start = composed(f"experiment={Path(tuned.trainer.init_from).name}")
    assert tuned.features == start.features
    assert tuned.model == start.model
