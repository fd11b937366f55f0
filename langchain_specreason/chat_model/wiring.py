"""A chat model's servers and graphs, built from its fields (plain values, no model object)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, TypeVar

from ..config import SpecReasonConfig
from ..endpoint import Endpoint, endpoint_pair
from ..endpoint.extra_body import WithExtraBody
from ..errors import ConfigError
from ..graph import Breaker, SpecReasonGraph, create_specreason_graph
from ..judges import Judge

ENDPOINT_FIELDS = (
    *("draft_url", "base_url", "draft_endpoint", "base_endpoint", "api_key", "draft_api_key"),
    *("draft_model", "base_model", "timeout", "judge_timeout", "connect_timeout"),
    *("max_retries", "max_concurrency", "model_kwargs", "extra_body", "default_headers"),
    *("http_client", "http_async_client"),
)
"""The fields :func:`build_endpoints` reads."""

GRAPHS_KEPT = 32
"""How many compiled graphs a chat model keeps (one per distinct per-call setting and
``extra_body``), the least recently used dropped first: ``invoke(q, seed=i)`` in a loop builds
a graph per call but keeps no more than these."""

G = TypeVar("G")


def same_endpoints(one: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    """Whether two models' :data:`ENDPOINT_FIELDS` (by name, aliases resolved) are the same."""
    return all(_same(one[name], other[name]) for name in ENDPOINT_FIELDS)


def _same(a: Any, b: Any) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:  # a value that cannot compare: not the same
        return False


def remembered(graphs: OrderedDict[Hashable, G], key: Hashable, build: Callable[[], G]) -> G:
    """``graphs[key]``, built by ``build`` when missing; at most :data:`GRAPHS_KEPT` kept."""
    if key in graphs:
        graphs.move_to_end(key)
        return graphs[key]
    graphs[key] = graph = build()
    while len(graphs) > GRAPHS_KEPT:
        graphs.popitem(last=False)
    return graph


def build_endpoints(fields: Mapping[str, Any]) -> dict[str, Endpoint]:
    """The ``draft`` and ``base`` endpoints: the ones given, else built from URLs and keys.

    ``fields`` holds the chat model's :data:`ENDPOINT_FIELDS` by name.
    """
    for name in ("draft", "base"):
        if fields[f"{name}_endpoint"] is None and not fields[f"{name}_url"]:
            raise ConfigError(
                f"no {name} server: pass {name}_url= (or set "
                f"SPECREASON_{name.upper()}_URL) or {name}_endpoint="
            )
    draft, base = endpoint_pair(
        fields["draft_url"] or "http://unused/v1",
        fields["base_url"] or "http://unused/v1",
        api_key=fields["api_key"],
        draft_api_key=fields["draft_api_key"],
        draft_model=fields["draft_model"],
        base_model=fields["base_model"],
        timeout=fields["timeout"] or 600.0,
        judge_timeout=fields["judge_timeout"],
        connect_timeout=fields["connect_timeout"],
        max_retries=fields["max_retries"],
        max_concurrency=fields["max_concurrency"],
        extra_body={**fields["model_kwargs"], **(fields["extra_body"] or {})},
        default_headers=fields["default_headers"],
        http_client=fields["http_client"],
        http_async_client=fields["http_async_client"],
    )
    return {
        "draft": fields["draft_endpoint"] or draft,
        "base": fields["base_endpoint"] or base,
    }


def build_graph(
    draft: Endpoint,
    base: Endpoint,
    extra: dict[str, Any] | None,
    *,
    config: SpecReasonConfig,
    judge: Judge | None,
    family: str,
    checkpointer: Any,
    breaker: Breaker,
) -> SpecReasonGraph:
    """The graph of ``config`` over the two servers; with ``extra``, added to each request.

    ``breaker``: the model's one draft circuit breaker, shared by all its graphs.
    """
    if extra:
        draft, base = WithExtraBody(draft, extra), WithExtraBody(base, extra)
    return create_specreason_graph(
        draft,
        base,
        config=config,
        judge=judge,
        family=family,
        # None would let LangGraph lend the run a parent graph's checkpointer (this
        # model called inside a node): a chat model call is not a subgraph
        checkpointer=checkpointer if checkpointer is not None else False,
        name="specreason",
        breaker=breaker,
    )
