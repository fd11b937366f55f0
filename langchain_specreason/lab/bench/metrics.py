"""Read a vLLM server's Prometheus ``/metrics``: what the server itself saw.

Used by the benchmark (prefix-cache hit rate over a run) and by tests that check the requests
a server really received, not only our own accounting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import httpx2 as httpx  # the HTTP library of the openai SDK (>= 3)
import openai
from prometheus_client.parser import text_string_to_metric_families

from ...endpoint import OpenAIEndpoint, server_root
from ...errors import EndpointError

REQUESTS = "vllm:request_success"
GENERATION_TOKENS = "vllm:generation_tokens"
PROMPT_TOKENS = "vllm:prompt_tokens"
CACHE_QUERIES = "vllm:prefix_cache_queries"
CACHE_HITS = "vllm:prefix_cache_hits"
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"


@dataclass(frozen=True)
class ServerCounters:
    """Totals of a server's counters (summed over labels) at one moment."""

    values: Mapping[str, float]

    def __getitem__(self, name: str) -> float:
        return self.values.get(name, 0.0)

    def __sub__(self, other: ServerCounters) -> ServerCounters:
        keys = set(self.values) | set(other.values)
        return ServerCounters({k: self[k] - other[k] for k in keys})

    @property
    def prefix_cache_hit_rate(self) -> float | None:
        """Share of queried prompt tokens found in the prefix cache (``None``: no queries)."""
        queries = self[CACHE_QUERIES]
        return self[CACHE_HITS] / queries if queries else None


def parse_counters(text: str) -> ServerCounters:
    """Sum every counter family of a Prometheus text page over its labels."""
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.type != "counter":
            continue
        total = sum(s.value for s in family.samples if s.name.endswith("_total"))
        totals[family.name] = totals.get(family.name, 0.0) + total
    return ServerCounters(totals)


def parse_gauges(text: str) -> dict[str, float]:
    """Sum every gauge family of a Prometheus text page over its labels (requests running...)."""
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.type == "gauge":
            totals[family.name] = totals.get(family.name, 0.0) + sum(
                s.value for s in family.samples
            )
    return totals


async def metrics_page(client: openai.AsyncOpenAI, name: str, base_url: str) -> str:
    """The server's Prometheus page (``GET /metrics``, vLLM's counters); not retried.

    ``client`` is the openai SDK client of the running event loop; ``name`` and ``base_url``
    name the server in the :class:`~.errors.EndpointError` raised when the page cannot be read.
    """
    url = server_root(base_url) + "/metrics"
    try:
        resp = await client.get(url, cast_to=httpx.Response)
    except (openai.APIConnectionError, openai.APITimeoutError, openai.APIStatusError) as exc:
        raise EndpointError(name, base_url, f"/metrics: {exc}") from exc
    return str(resp.text)


async def in_flight(base_url: str, *, timeout: float = 10.0) -> float:
    """Requests the server is running or holding in its queue right now."""
    server = OpenAIEndpoint(base_url, name="metrics", timeout=timeout, max_retries=0)
    gauges = parse_gauges(await metrics_page(server.client, server.name, server.base_url))
    return gauges.get(RUNNING, 0.0) + gauges.get(WAITING, 0.0)


async def scrape(base_url: str, *, timeout: float = 10.0) -> ServerCounters:
    """Fetch and parse ``/metrics`` of the server whose OpenAI base URL is ``base_url``.

    Raises :class:`~.errors.EndpointError` when the page cannot be read.
    """
    server = OpenAIEndpoint(base_url, name="metrics", timeout=timeout, max_retries=0)
    return parse_counters(await metrics_page(server.client, server.name, server.base_url))
