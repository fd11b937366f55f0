"""The graph for ``langgraph dev`` / LangGraph Studio, built from environment settings.

``langgraph.json`` at the repo root points at :func:`make_graph` (LangGraph's server calls a
graph factory; a module attribute built lazily is invisible to it). Settings:

* ``SPECREASON_DRAFT_URL``, ``SPECREASON_BASE_URL`` (required): OpenAI-compatible base URLs;
* ``SPECREASON_DRAFT_MODEL``, ``SPECREASON_BASE_MODEL``: served names (default: discovered);
* ``SPECREASON_DRAFT_API_KEY``, ``SPECREASON_BASE_API_KEY``: keys, if the servers need them;
* ``SPECREASON_FAMILY``: ``instruct`` (default) or ``think``;
* ``SPECREASON_<KNOB>`` for any :class:`~.config.SpecReasonConfig` field, e.g.
  ``SPECREASON_JUDGE=score``, ``SPECREASON_THRESHOLD=7``, ``SPECREASON_BUDGET=4096``.
"""

from __future__ import annotations

import os
from typing import Any

# Absolute imports: `langgraph dev` loads this file by path, not as part of the package.
from langchain_specreason.config import SpecReasonConfig
from langchain_specreason.endpoint import endpoint_pair
from langchain_specreason.errors import ConfigError
from langchain_specreason.graph import create_specreason_graph

_GRAPHS: dict[tuple[tuple[str, str], ...], Any] = {}
"""Graphs built so far, by their ``SPECREASON_*`` settings: one set of endpoints (and one
``/v1/models`` lookup) per configuration, not per request."""


def graph_from_env(env: dict[str, str] | None = None) -> Any:
    """The SpecReason graph of the ``SPECREASON_*`` variables (see the module docstring).

    Built once per distinct configuration and reused.
    """
    env = dict(os.environ if env is None else env)
    key = tuple(sorted((k, v) for k, v in env.items() if k.startswith("SPECREASON_")))
    if key not in _GRAPHS:
        _GRAPHS[key] = _build(env)
    return _GRAPHS[key]


def _build(env: dict[str, str]) -> Any:
    missing = [k for k in ("SPECREASON_DRAFT_URL", "SPECREASON_BASE_URL") if not env.get(k)]
    if missing:
        raise ConfigError(f"set {' and '.join(missing)} (e.g. from `specreason serve` output)")
    draft, base = endpoint_pair(
        env["SPECREASON_DRAFT_URL"],
        env["SPECREASON_BASE_URL"],
        api_key=env.get("SPECREASON_BASE_API_KEY") or None,
        draft_api_key=env.get("SPECREASON_DRAFT_API_KEY") or None,
        draft_model=env.get("SPECREASON_DRAFT_MODEL") or None,
        base_model=env.get("SPECREASON_BASE_MODEL") or None,
    )
    return create_specreason_graph(
        draft,
        base,
        config=SpecReasonConfig.from_env(env),
        family=env.get("SPECREASON_FAMILY", "instruct"),
    )


def make_graph() -> Any:
    """The graph factory ``langgraph.json`` names (``langgraph dev`` calls it at load time)."""
    return graph_from_env()


def __getattr__(name: str) -> Any:  # built on first access, so importing never needs the env
    if name == "graph":
        return graph_from_env()
    raise AttributeError(name)
