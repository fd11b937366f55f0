"""The graph for ``langgraph dev`` / LangGraph Studio, built from environment settings.

``langgraph.json`` at the repo root points at :func:`make_graph` (LangGraph's server calls a
graph factory; a module attribute built lazily is invisible to it). Settings:

* ``SPECREASON_DRAFT_URL``, ``SPECREASON_BASE_URL`` (required): OpenAI-compatible base URLs;
* ``SPECREASON_DRAFT_MODEL``, ``SPECREASON_BASE_MODEL``: served names (default: discovered);
* ``SPECREASON_DRAFT_API_KEY``, ``SPECREASON_BASE_API_KEY``: keys, if the servers need them;
* ``SPECREASON_FAMILY``: ``instruct`` (default) or ``think``;
* ``SPECREASON_<KNOB>`` for any :class:`~.config.SpecReasonConfig` field, e.g.
  ``SPECREASON_JUDGE=score``, ``SPECREASON_THRESHOLD=7``, ``SPECREASON_BUDGET=4096``.

Per assistant (Studio's assistant form, or ``context=`` / ``configurable`` of an assistant or a
run), the fields of :class:`StudioContext` override those: the judge, its thresholds, the
budgets, the base model's first steps and the temperature. Without the two URLs the server
fails as it loads the graph, saying which variables to set (see ``.env.example``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from typing_extensions import TypedDict  # pydantic reads it (the Studio schema) on 3.11

# Absolute imports: `langgraph dev` loads this file by path, not as part of the package.
from langchain_specreason.config import SpecReasonConfig
from langchain_specreason.endpoint import endpoint_pair
from langchain_specreason.errors import ConfigError
from langchain_specreason.graph import create_specreason_graph

if TYPE_CHECKING:
    from langgraph_sdk.runtime import ServerRuntime


class StudioContext(TypedDict, total=False):
    """The settings an assistant may change (Studio shows them as a form).

    Unset fields keep the ``SPECREASON_*`` values. Each is the
    :class:`~.config.SpecReasonConfig` field of that name.
    """

    judge: str
    """Which judge decides (a name of :func:`~.judges.registry.judge_specs`; ``a+b`` cascades):
    ``arithmetic+likelihood`` (default), ``score``, ``likelihood``, ``confidence``,
    ``arithmetic``, ``learned``. Its threshold is the field the judge names."""
    threshold: float
    """The ``score`` judge's threshold (0-9)."""
    likelihood_threshold: float
    """The ``likelihood`` judge's threshold (a log-probability)."""
    budget: int
    """Token budget of the reasoning trace."""
    step_max_tokens: int
    """Cap on the tokens of one step."""
    answer_max_tokens: int
    """Cap on the tokens of the final answer."""
    first_n_base_steps: int
    """The base model writes the first n steps itself."""
    temperature: float
    """Sampling temperature of drafts, rewrites and the answer."""


_GRAPHS: dict[tuple[tuple[str, str], ...], Any] = {}
"""Graphs built so far, by their ``SPECREASON_*`` settings: one set of endpoints (and one
``/v1/models`` lookup) per configuration, not per request."""


def graph_from_env(
    env: dict[str, str] | None = None, overrides: dict[str, Any] | None = None
) -> Any:
    """The SpecReason graph of the ``SPECREASON_*`` variables and an assistant's overrides.

    ``overrides``: :class:`StudioContext` fields (see the module docstring). Built once per
    distinct configuration and reused.
    """
    env = dict(os.environ if env is None else env)
    settings = {k: v for k, v in env.items() if k.startswith("SPECREASON_")}
    for name, value in (overrides or {}).items():
        settings[f"SPECREASON_{name.upper()}"] = str(value)
    key = tuple(sorted(settings.items()))
    if key not in _GRAPHS:
        _GRAPHS[key] = _build({**env, **settings})
    return _GRAPHS[key]


def require_urls(env: dict[str, str] | os._Environ[str]) -> None:
    """:class:`ConfigError` naming the server URL variables ``env`` lacks."""
    missing = [k for k in ("SPECREASON_DRAFT_URL", "SPECREASON_BASE_URL") if not env.get(k)]
    if missing:
        raise ConfigError(
            f"set {' and '.join(missing)} (e.g. from `specreason serve` output; in a `.env` "
            "file beside langgraph.json for `langgraph dev`: see .env.example)"
        )


def _build(env: dict[str, str]) -> Any:
    require_urls(env)
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
        context_schema=StudioContext,
    )


def make_graph(config: RunnableConfig, runtime: ServerRuntime) -> Any:
    """The graph factory ``langgraph.json`` names: the server calls it for each run.

    Also to read the graph's schemas; with the run's config and, for a run, its context.
    An assistant's settings come from its context (:class:`StudioContext`), else from its
    ``configurable``; both override the ``SPECREASON_*`` variables.
    """
    return graph_from_env(overrides=studio_overrides(config, runtime))


def studio_overrides(config: RunnableConfig | None, runtime: Any = None) -> dict[str, Any]:
    """The :class:`StudioContext` fields a run sets (its context wins over ``configurable``)."""
    fields = StudioContext.__annotations__
    out = {k: v for k, v in ((config or {}).get("configurable") or {}).items() if k in fields}
    execution = getattr(runtime, "execution_runtime", None)
    context = getattr(execution, "context", None) or {}
    if not isinstance(context, dict):
        context = {k: getattr(context, k) for k in fields if hasattr(context, k)}
    out.update({k: v for k, v in context.items() if k in fields and v is not None})
    return out


def __getattr__(name: str) -> Any:  # built on first access, so importing never needs the env
    if name == "graph":
        return graph_from_env()
    raise AttributeError(name)


if __name__ != "langchain_specreason.studio":
    # loaded by path, as `langgraph dev` and the Agent Server load langgraph.json's graphs:
    # without the servers' URLs, fail now, saying what to set (not at every request)
    require_urls(os.environ)
