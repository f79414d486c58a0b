"""`asr-wyoming`: the package as a Wyoming server, the protocol Home Assistant's voice pipeline
speaks to speech-to-text, intent and wake-word services.

    asr-wyoming                                  # tcp://127.0.0.1:10300, the base model
    asr-wyoming --grammar ha:en --home home.yaml # Home Assistant's sentences, the home's names
    asr-wyoming --uri unix:///run/asr.sock       # or stdio://

The parts: `protocol` (the wire as untrusted input: bounded events, audio in any PCM format),
`engine` (the settings, the models in worker threads, the `info`), `handler` (one connection's
events), `wake` (the seam for a wake-word service), `server` (the command). docs/home_assistant.md
says how to point Home Assistant at it. Wyoming has no authentication: the server binds the
loopback address unless told otherwise.
"""

from .engine import Engine, EnginePool, ServerConfig, describe
from .server import main

__all__ = ["Engine", "EnginePool", "ServerConfig", "describe", "main"]
