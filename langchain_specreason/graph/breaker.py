"""The draft server's circuit breaker: a draft that just failed is not asked by every run.

Without it, each run of a long-lived chat model probes a dead draft server again (a connect
timeout, or retries with back-off) before the base model takes over. After an outage the
breaker stays open for ``SpecReasonConfig.draft_cooldown`` seconds: runs in that time go
straight to the base model and say why (``draft_down``, a ``fallback`` event); the first run
after it asks the draft again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Breaker:
    """Open for ``cooldown`` seconds after :meth:`trip`; shared by the runs of one graph."""

    cooldown: float
    clock: Callable[[], float] | None = None
    """Seconds now (default: :func:`time.monotonic`)."""
    _until: float = field(default=0.0, init=False)
    _reason: str = field(default="", init=False)

    def trip(self, reason: str) -> None:
        """The draft failed with ``reason`` (already redacted): skip it for a while."""
        if self.cooldown > 0:
            self._until = self._now() + self.cooldown
            self._reason = reason

    def reset(self) -> None:
        """The draft answered: ask it again from now on."""
        self._until = 0.0

    def blocked(self) -> str | None:
        """Why the draft is skipped now, or None when it may be asked."""
        left = self._until - self._now()
        if left <= 0:
            return None
        return (
            f"{self._reason}; the draft server is skipped for {left:.0f} s more "
            f"(draft_cooldown={self.cooldown:g})"
        )

    def _now(self) -> float:
        return (self.clock or _monotonic)()


def _monotonic() -> float:
    return time.monotonic()
