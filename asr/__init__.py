"""asr: a readable Speech-Transformer speech recognizer.

Data flows one way: audio (`asr.audio`) -> features (`asr.features`) -> model (`asr.model`)
-> decoding (`asr.decoding`) -> text (`asr.text`, `asr.tokenizer`).
"""

__version__ = "0.1.0"
