"""asr: a readable Speech-Transformer speech recognizer.

Data flows one way: audio (`asr.audio`, `asr.stream`) -> features (`asr.features`) -> model
(`asr.model`) -> decoding (`asr.decoding`) -> text (`asr.text`, `asr.tokenizer`).
`asr.Transcriber` puts them together: `Transcriber.from_pretrained(dir).transcribe(path).text`.
"""

__version__ = "0.1.0"

__all__ = ["Transcriber", "Transcript", "Segment"]


def __getattr__(name: str):
    """`from asr import Transcriber` without importing torch for `import asr` alone."""
    if name in __all__:
        from asr import transcriber
        return getattr(transcriber, name)
    raise AttributeError(f"module 'asr' has no attribute {name!r}")
