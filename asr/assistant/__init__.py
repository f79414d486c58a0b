"""The voice assistant: an app built on the `asr` toolkit, which never imports it.

Audio -> utterances (`asr.vad`) -> text (`asr.Transcriber`) -> an intent of a command grammar
(`grammar`, `intents`) -> a whitelisted action (`actions`), live from a microphone or a file
(`demo`, the `asr-demo` console script; `intents` is `asr-intents`).
"""
