"""Models shipped inside the package, by name: `Transcriber.from_pretrained("base")`,
`asr-transcribe x.wav` (no --model), `asr-intents --grammar coffee.yaml x.wav`.

"base" is one general English acoustic model (recipes/base: broad text in many synthetic
voices plus real people), so that a grammar given at load time constrains its search and works
with no training; fine-tuning starts from it (`trainer.init_from=base`). Its folder is an
ordinary model directory (weights in fp16, config, tokenizer, its default grammar, the
grammar search's calibrated threshold, and in lm/ the language model its config fuses into free
transcription); `TRAINING.json` beside them says what it was trained on and for how long.

A name wins over a folder of the same name in the working directory, as whisper's model names
do: write `./base` for such a folder.
"""

from pathlib import Path

FOLDER = Path(__file__).resolve().parent
NAMES = ("base",)
DEFAULT = "base"


def model_path(name_or_dir: str | Path) -> Path:
    """The folder of a shipped model's name, or the model directory given."""
    if isinstance(name_or_dir, str) and name_or_dir in NAMES:
        return FOLDER / name_or_dir
    return Path(name_or_dir)
