"""langgraph.json exposes the graph, built from environment settings."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from langchain_specreason import ConfigError, SpecReasonConfig
from langchain_specreason.graph import NODES
from langchain_specreason.studio import graph_from_env

ROOT = Path(__file__).resolve().parents[2]


def test_langgraph_json_points_at_the_studio_graph(monkeypatch):
    spec = json.loads((ROOT / "langgraph.json").read_text())
    path, attr = spec["graphs"]["specreason"].split(":")
    assert (ROOT / path).is_file()
    monkeypatch.setenv("SPECREASON_DRAFT_URL", "http://127.0.0.1:8101/v1")
    monkeypatch.setenv("SPECREASON_BASE_URL", "http://127.0.0.1:8102/v1")
    module = importlib.import_module(path.removeprefix("./").removesuffix(".py").replace("/", "."))
    factory = getattr(module, attr)
    assert callable(factory)  # `langgraph dev` calls a factory; it cannot see a lazy attribute
    graph = factory({"configurable": {}}, None)
    assert set(NODES) <= set(graph.get_graph().nodes)


def test_config_from_env():
    config = SpecReasonConfig.from_env(
        {
            "SPECREASON_THRESHOLD": "5",
            "SPECREASON_BUDGET": "64",
            "SPECREASON_SCORE_METHOD": "average",
            "SPECREASON_DELIMITER": "\\n\\n",
            "SPECREASON_SEED": "3",
        }
    )
    assert (config.threshold, config.budget, config.score_method) == (5.0, 64, "average")
    assert config.delimiter == "\n\n" and config.seed == 3
    with pytest.raises(ConfigError, match="budget: Input should be a valid integer"):
        SpecReasonConfig.from_env({"SPECREASON_BUDGET": "many"})


def test_missing_urls_is_a_config_error():
    with pytest.raises(ConfigError, match="set SPECREASON_DRAFT_URL and SPECREASON_BASE_URL"):
        graph_from_env({})


def test_the_factory_builds_once_per_configuration():
    env = {"SPECREASON_DRAFT_URL": "http://d/v1", "SPECREASON_BASE_URL": "http://b/v1"}
    first = graph_from_env(env)
    assert graph_from_env(dict(env)) is first  # same settings: the same graph and endpoints
    other = graph_from_env({**env, "SPECREASON_JUDGE": "score"})
    assert other is not first


ENV = {"SPECREASON_DRAFT_URL": "http://d/v1", "SPECREASON_BASE_URL": "http://b/v1"}


class _Execution:
    def __init__(self, context):
        self.context = context


class _Runtime:  # the part of langgraph_sdk's ServerRuntime the factory reads
    def __init__(self, context):
        self.execution_runtime = _Execution(context)


def test_an_assistants_context_and_configurable_override_the_environment():
    from langchain_specreason.studio import studio_overrides

    config = {"configurable": {"judge": "score", "thread_id": "t", "budget": 64}}
    assert studio_overrides(config, None) == {"judge": "score", "budget": 64}
    # the run's context wins over configurable; unknown keys are not settings
    runtime = _Runtime({"budget": 128, "user": "x", "threshold": None})
    assert studio_overrides(config, runtime) == {"judge": "score", "budget": 128}
    # the same setting, by context or by environment: one graph, built once
    by_context = graph_from_env(ENV, {"judge": "score", "threshold": 7})
    by_env = graph_from_env({**ENV, "SPECREASON_JUDGE": "score", "SPECREASON_THRESHOLD": "7"})
    assert by_context is by_env
    with pytest.raises(ConfigError, match="budget"):
        graph_from_env(ENV, {"budget": "many"})


def test_studio_shows_the_context_schema_and_the_server_calls_the_factory_with_it(monkeypatch):
    import inspect

    from langchain_specreason.studio import StudioContext, make_graph

    # the LangGraph server passes the run's config and, to a parameter annotated
    # ServerRuntime, the runtime with the run's context (the real server: test_studio_dev.py)
    params = inspect.signature(make_graph).parameters
    assert [(p.name, p.annotation) for p in params.values()] == [
        ("config", "RunnableConfig"),
        ("runtime", "ServerRuntime"),
    ]
    kwargs = {"config": {"configurable": {}}, "runtime": _Runtime({"judge": "score"})}
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    graph = make_graph(**kwargs)
    assert graph is graph_from_env(None, {"judge": "score"})  # the assistant's setting
    schema = graph.get_context_jsonschema()
    assert set(schema["properties"]) == set(StudioContext.__annotations__)


def test_loaded_by_path_without_the_urls_fails_at_load_naming_them(monkeypatch):
    import importlib.util
    import sys

    for name in ("SPECREASON_DRAFT_URL", "SPECREASON_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    path = ROOT / "langchain_specreason" / "studio.py"
    spec = importlib.util.spec_from_file_location("langchain_specreason__studio", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "langchain_specreason__studio", module)
    with pytest.raises(
        ConfigError,
        match=r"set SPECREASON_DRAFT_URL and SPECREASON_BASE_URL .*"
        r"\.env\.example",
    ):
        spec.loader.exec_module(module)
