"""The seam for a wake-word service (`detect` -> audio -> `detection` / `not-detected`).

The server offers wake words only where the package has a spotter (`asr.wake`) and an
adapter here that speaks for it: `WakeService`. Without `asr.wake` there is none, `info`
lists no wake program and a `detect` is answered with an `error` (code "no-wake").
"""

from typing import Protocol

import numpy as np
from wyoming.info import WakeProgram


class WakeService(Protocol):
    """What the handler asks of a wake-word spotter."""

    def program(self) -> WakeProgram:
        """The `info` event's wake program (its models: the phrases it spots)."""

    def detect(self, wave: np.ndarray, names: list[str] | None) -> tuple[str, float] | None:
        """(the phrase's name, seconds into `wave` where it ends), or None when no phrase of
        `names` (None: any) was said; `wave` is mono float32 at the model's rate."""


def load_wake() -> WakeService | None:
    """The package's wake service, or None where `asr.wake` is not there (or has no
    adapter for this server yet: `asr.wake.wyoming_service()`)."""
    try:
        import asr.wake as wake  # built beside this server; absent until it lands
    except ImportError:
        return None
    factory = getattr(wake, "wyoming_service", None)
    return factory() if callable(factory) else None
