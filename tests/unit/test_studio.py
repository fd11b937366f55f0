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
    graph = factory()
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
