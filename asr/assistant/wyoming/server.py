"""`asr-wyoming`: the command that starts the server (`python -m asr.assistant.wyoming`)."""

import asyncio
import logging
import sys
from dataclasses import fields
from functools import partial
from urllib.parse import urlparse

from wyoming.event import async_get_stdin
from wyoming.server import AsyncServer

from asr.assistant.intents.cli import ERRORS
from asr.cli import ArgumentParser, float_in, int_in, one_line_warnings, print_error

from .engine import EnginePool, ServerConfig, describe
from .handler import Handler, Service
from .wake import load_wake

_LOGGER = logging.getLogger("asr.wyoming")
DEFAULTS = ServerConfig()
HELP = {
    "uri": "tcp://HOST:PORT, unix://PATH or stdio:// (default: %(default)s; Wyoming has no "
           "authentication: bind another address only on a network you trust)",
    "model": "a model directory or a shipped model's name (default: %(default)s)",
    "grammar": "a grammar: a Rhino context file, or Home Assistant's sentences (ha:en, a "
               "custom_sentences folder); transcripts are then its sentences, and intents served",
    "home": "Home Assistant's sentences: a YAML file of the home's areas, floors and devices",
    "min_confidence": "the grammar search's lowest confidence (default: the model's calibrated)",
    "workers": "decoding threads, one core each (default: %(default)s)",
    "partial_seconds": "a partial transcript per this much new audio; 0: none (default: "
                       "%(default)s)",
    "max_audio_seconds": "longest utterance (default: %(default)s)",
    "max_clients": "connections at once (default: %(default)s)",
    "idle_timeout": "seconds a connection may be silent (default: %(default)s)",
    "body_timeout": "seconds for the bytes an event announces (default: %(default)s)",
}
TYPES = {"min_confidence": float_in(0, 1), "workers": int_in(1, 64),
         "partial_seconds": float_in(0, 60), "max_audio_seconds": float_in(1, 3600),
         "max_clients": int_in(1, 10000), "idle_timeout": float_in(1, 86400),
         "body_timeout": float_in(1, 3600)}


def argument_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="asr-wyoming", description="A Wyoming server (Home "
                            "Assistant's voice protocol): speech to text, intents.")
    for field in fields(ServerConfig):
        parser.add_argument("--" + field.name.replace("_", "-"), dest=field.name,
                            default=getattr(DEFAULTS, field.name),
                            type=TYPES.get(field.name, str), help=HELP[field.name])
    parser.add_argument("--debug", action="store_true", help="log every event")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = argument_parser().parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s: %(message)s")
    config = ServerConfig(**{f.name: getattr(args, f.name) for f in fields(ServerConfig)})
    if urlparse(config.uri).scheme not in ("tcp", "unix", "stdio"):
        argument_parser().error(f"--uri must be tcp://, unix:// or stdio://, got {config.uri!r}")
    try:
        with one_line_warnings():
            pool = EnginePool(config)
    except ERRORS as err:
        print_error(err)
        return 1
    wake = load_wake()
    service = Service(config, pool, describe(config, wake.program() if wake else None), wake)
    try:
        asyncio.run(serve(service))
    except KeyboardInterrupt:
        pass
    except (OSError, ValueError) as err:  # the address is taken, or no such host
        print_error(f"{config.uri}: cannot serve ({err})")
        return 1
    finally:
        pool.close()
    return 0


async def serve(service: Service) -> None:
    """Serve until SIGTERM (the wyoming library's servers stop on it) or the input ends."""
    factory = partial(Handler, server=service)
    if urlparse(service.config.uri).scheme == "stdio":
        await _serve_stdio(factory)
        return
    server = AsyncServer.from_uri(service.config.uri)
    _LOGGER.info("serving on %s", service.config.uri)
    await server.run(factory)
    _LOGGER.info("stopped")


async def _serve_stdio(factory) -> None:
    """One client on stdin/stdout, read with the same bounds as a socket's."""
    loop = asyncio.get_running_loop()
    reader = await async_get_stdin()
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                        sys.stdout)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    await factory(reader, writer).run()
