"""What the servers themselves saw during one cell: counters before and after, gauges sampled.

vLLM's Prometheus names (vLLM 0.32, ``vllm/v1/metrics/loggers.py`` and
``vllm/v1/spec_decode/metrics.py``): the counters ``vllm:prompt_tokens_total``,
``vllm:generation_tokens_total``, ``vllm:request_success_total``,
``vllm:spec_decode_num_drafts_total``, ``vllm:spec_decode_num_draft_tokens_total`` and
``vllm:spec_decode_num_accepted_tokens_total`` (the last three only on a server with a
speculator), and the gauges ``vllm:num_requests_running`` and ``vllm:num_requests_waiting``.
The Prometheus parser names a counter's family without its ``_total``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ...endpoint import OpenAIEndpoint
from ...errors import EndpointError
from ..bench.metrics import (
    CACHE_HITS,
    GENERATION_TOKENS,
    PROMPT_TOKENS,
    REQUESTS,
    RUNNING,
    WAITING,
    ServerCounters,
    metrics_page,
    parse_counters,
    parse_gauges,
)

SPEC_DRAFTS = "vllm:spec_decode_num_drafts"
SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
SPEC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens"

LOAD_COUNTERS: dict[str, str] = {
    "requests": REQUESTS,
    "prompt_tokens": PROMPT_TOKENS,
    "generation_tokens": GENERATION_TOKENS,
    "prefix_cache_hits": CACHE_HITS,
    "spec_drafts": SPEC_DRAFTS,
    "spec_draft_tokens": SPEC_DRAFT_TOKENS,
    "spec_accepted_tokens": SPEC_ACCEPTED,
}
"""The counters a cell records per server (our names: vLLM's family names)."""

ROLES = ("draft", "base")


def counter_values(counters: ServerCounters | None) -> dict[str, float] | None:
    """The recorded counters of one snapshot (a name the server does not serve is left out)."""
    if counters is None:
        return None
    return {ours: counters[name] for ours, name in LOAD_COUNTERS.items() if name in counters.values}


def counter_change(
    before: ServerCounters | None, after: ServerCounters | None
) -> dict[str, Any] | None:
    """``before``, ``after`` and their difference for the recorded counters (``None``: unread).

    A counter present in only one snapshot (a server restarted in between) has no difference.
    Where the server speculates, ``acceptance`` is accepted over drafted tokens of the cell.
    """
    was, now = counter_values(before), counter_values(after)
    if was is None or now is None:
        return None
    delta = {k: now[k] - was[k] for k in now if k in was}
    drafted = delta.get("spec_draft_tokens")
    return {
        "before": was,
        "after": now,
        "delta": delta,
        "acceptance": delta["spec_accepted_tokens"] / drafted
        if drafted and "spec_accepted_tokens" in delta
        else None,
    }


def gauge_sample(text: str) -> dict[str, float]:
    """Requests running and waiting on one ``/metrics`` page."""
    gauges = parse_gauges(text)
    return {"running": gauges.get(RUNNING, 0.0), "waiting": gauges.get(WAITING, 0.0)}


def gauge_summary(samples: Sequence[Mapping[str, float]]) -> dict[str, Any] | None:
    """Mean and most of running and waiting requests over a cell's samples (``None``: none)."""
    if not samples:
        return None
    out: dict[str, Any] = {"samples": len(samples)}
    for key in ("running", "waiting"):
        values = [float(s[key]) for s in samples]
        out[f"{key}_mean"] = sum(values) / len(values)
        out[f"{key}_max"] = max(values)
    return out


class Watch:
    """Reads the servers' ``/metrics``: counters on demand, gauges sampled in the background."""

    def __init__(self, urls: Mapping[str, str], *, interval: float = 1.0, timeout: float = 10.0):
        self.interval = interval
        self._servers = {
            role: OpenAIEndpoint(url, name="metrics", timeout=timeout, max_retries=0)
            for role, url in urls.items()
        }

    async def page(self, role: str) -> str | None:
        """The ``/metrics`` page of ``role`` (``None`` when it cannot be read)."""
        server = self._servers[role]
        try:
            return await metrics_page(server.client, server.name, server.base_url)
        except EndpointError:
            return None

    async def counters(self) -> dict[str, ServerCounters | None]:
        """Each server's counters now."""
        out: dict[str, ServerCounters | None] = {}
        for role in self._servers:
            text = await self.page(role)
            try:
                out[role] = parse_counters(text) if text is not None else None
            except ValueError:
                out[role] = None
        return out

    @contextlib.asynccontextmanager
    async def sampling(self) -> Any:
        """Sample each server's gauges every :attr:`interval` s; yields the samples by role."""
        samples: dict[str, list[dict[str, float]]] = {role: [] for role in self._servers}
        task = asyncio.create_task(self._sample(samples))
        try:
            yield samples
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _sample(self, samples: dict[str, list[dict[str, float]]]) -> None:
        while True:
            for role, got in samples.items():
                await sample_once(self.page, role, got)
            await asyncio.sleep(self.interval)


async def sample_once(
    page: Callable[[str], Awaitable[str | None]], role: str, into: list[dict[str, float]]
) -> None:
    """Append one gauge sample of ``role`` (an unreadable page adds none)."""
    text = await page(role)
    if text is None:
        return
    try:
        into.append(gauge_sample(text))
    except ValueError:
        return
