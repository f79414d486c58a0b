"""Cases: a spoiled config.yaml in the model directory (YAML attacks, bad types and values)."""

from collections.abc import Callable

from robustness.case import BOMB, Cli, Work, case, transcribe


def spoil_config(kind: str, name: str, edit: Callable[[str], str]) -> None:
    def make(w: Work) -> Cli:
        config = w.model / "config.yaml"
        config.write_text(edit(config.read_text()))
        return transcribe(w)
    case(kind, name)(make)


def set_key(path: str, value: str) -> Callable[[str], str]:
    """Replace (or add) `section.key: value` in the YAML text."""
    def edit(text: str) -> str:
        import yaml
        data = yaml.safe_load(text)
        keys = path.split(".")
        target = data
        for key in keys[:-1]:
            if not isinstance(target.get(key), dict):
                target[key] = {}
            target = target[key]
        target[keys[-1]] = yaml.safe_load(value)
        return yaml.safe_dump(data)
    return edit


spoil_config("config", "billion laughs appended", lambda t: t + BOMB)
spoil_config("config", "one harmless alias", lambda t: t + "x: &x 1\ny: *x\n")
spoil_config("config", "nested 200 deep", lambda t: t + "deep: " + "[" * 200 + "]" * 200 + "\n")
spoil_config("config", "2 MB of comments", lambda t: t + "#" * (2 << 20) + "\n")
spoil_config("config", "empty", lambda t: "")
spoil_config("config", "a list", lambda t: "- 1\n- 2\n")
spoil_config("config", "a scalar", lambda t: "hello\n")
spoil_config("config", "python tag", lambda t: "x: !!python/object/apply:os.system ['true']\n" + t)
spoil_config("config", "interpolation of an env var", set_key("decode.lm", "'${oc.env:HOME}'"))
spoil_config("config", "interpolation loop", lambda t: t + "a: ${b}\nb: ${a}\n")
spoil_config("config", "_target_ os.system", set_key("optim._target_", "os.system"))
spoil_config("config", "tab-broken YAML", lambda t: t + "\tbad: [\n")
for key, value in [("decode", "5"), ("decode", "[1, 2]"), ("decode.unknown_key", "1"),
                   ("decode.beam_size", "0"), ("decode.beam_size", "-1"),
                   ("decode.beam_size", "1000000"), ("decode.beam_size", "five"),
                   ("decode.beam_size", "2.5"), ("decode.beam_size", "true"),
                   ("decode.max_len_ratio", "0"), ("decode.max_len_ratio", "-1"),
                   ("decode.max_len_ratio", "1.0e9"), ("decode.max_len_ratio", ".nan"),
                   ("decode.max_len_ratio", ".inf"), ("decode.length_penalty", ".nan"),
                   ("decode.ctc_weight", "1.5"), ("decode.pre_beam_ratio", "1.0e9"),
                   ("decode.max_repeats", "-1"), ("decode.encoder_batch", "0"),
                   ("decode.lead_in_ms", "1.0e12"), ("decode.lead_in_ms", ".inf"),
                   ("decode.lead_in_ms", "-5"), ("decode.lm_weight", "1.0e300"),
                   ("decode.words", "5"), ("decode.words", "[]"), ("decode.words", "['']"),
                   ("decode.mode", "foo"), ("decode.kv_cache", "maybe"),
                   ("decode.lm", "/nonexistent"), ("decode.lm", "/dev/zero"),
                   ("model", "null"), ("model", "5"), ("model.d_model", "-1"),
                   ("model.d_model", "1000000000000"), ("model.n_head", "0"),
                   ("model.n_head", "3"), ("model.n_encoder_layers", "10000000"),
                   ("model.n_vocab", "0"), ("model.dropout", ".nan"), ("model.subsampling", "x"),
                   ("model.unknown", "1"), ("model.d_model", "32"), ("model.stack", "0"),
                   ("features.sample_rate", "0"), ("features.sample_rate", "1000000000"),
                   ("features.n_fft", "0"), ("features.n_fft", "1000000000"),
                   ("features.hop_ms", "0"), ("features.win_ms", "1.0e9"),
                   ("features.n_mels", "10000000"), ("features.kind", "bad"),
                   ("features.log_floor", "0"), ("features.unknown", "1")]:
    spoil_config("config", f"{key}: {value}", set_key(key, value))
