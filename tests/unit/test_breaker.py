"""A draft server that just failed is skipped for ``draft_cooldown`` seconds, then asked again."""

from __future__ import annotations

import warnings

import pytest

from langchain_specreason import SpecReasonConfig
from langchain_specreason.errors import EndpointError
from langchain_specreason.graph import breaker, create_specreason_graph

from .fakes import ScriptedEndpoint, is_judge, score, step

QUESTION = {"messages": [("user", "What is 2+2?")]}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(breaker, "_monotonic", clock)
    return clock


def _pair(draft_up: dict[str, bool]) -> tuple[ScriptedEndpoint, ScriptedEndpoint]:
    def draft_step(request):
        if not draft_up["up"]:
            raise EndpointError("draft", "http://d/v1", "unreachable (connection refused)")
        return step("2+2 = 4.", 4, end=True)

    draft = ScriptedEndpoint("draft", draft_step)
    base = ScriptedEndpoint(
        "base", lambda r: score("9") if is_judge(r) else step("2+2 = 4.", 4, end=True)
    )
    return draft, base


async def _run(graph) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return await graph.ainvoke(QUESTION)


async def test_a_failed_draft_is_skipped_for_the_cooldown_then_asked_again(clock):
    up = {"up": False}
    draft, base = _pair(up)
    graph = create_specreason_graph(draft, base, config=SpecReasonConfig(judge="score"))

    first = await _run(graph)
    assert len(draft.requests) == 1  # asked once, failed: the base wrote the step
    assert first["draft_down"].startswith("draft endpoint at http://d/v1: unreachable")

    clock.now += 10
    second = await _run(graph)
    assert len(draft.requests) == 1  # not asked again within the cooldown
    assert "skipped for 20 s more (draft_cooldown=30)" in second["draft_down"]
    assert [s["author"] for s in second["steps"]] == ["base"]

    up["up"] = True
    clock.now += 21
    third = await _run(graph)
    assert len(draft.requests) == 2  # past the cooldown: asked again, and it answered
    assert third["draft_down"] is None
    assert [s["author"] for s in third["steps"]] == ["draft"]


async def test_a_cooldown_of_zero_asks_the_draft_on_every_run(clock):
    draft, base = _pair({"up": False})
    graph = create_specreason_graph(
        draft, base, config=SpecReasonConfig(judge="score", draft_cooldown=0)
    )
    for _ in range(3):
        await _run(graph)
    assert len(draft.requests) == 3


async def test_a_skipped_draft_is_a_visible_fallback(clock):
    draft, base = _pair({"up": False})
    graph = create_specreason_graph(draft, base, config=SpecReasonConfig(judge="score"))
    await _run(graph)
    events = []
    with pytest.warns(UserWarning, match="skipped for 30 s more"):
        async for event in graph.astream(QUESTION, stream_mode="custom"):
            events.append(event)
    fallbacks = [e for e in events if e["type"] == "fallback"]
    assert len(fallbacks) == 1 and "skipped for 30 s more" in fallbacks[0]["reason"]


async def test_an_open_breaker_skips_the_start_nodes_window_and_token_probes(clock):
    """During an outage the ``start`` node does not ask the draft for its window or counts."""
    from .fakes import WindowedScriptedEndpoint

    probes = {"n": 0}

    class Dead(WindowedScriptedEndpoint):
        async def max_model_len(self) -> int | None:
            probes["n"] += 1
            raise EndpointError("draft", "http://d/v1", "unreachable (connection refused)")

    draft = Dead("draft", lambda r: step("x", 1), window=4096)
    base = WindowedScriptedEndpoint(
        "base", lambda r: score("9") if is_judge(r) else step("2+2 = 4.", 4, end=True), window=4096
    )
    graph = create_specreason_graph(draft, base, config=SpecReasonConfig(judge="score"))
    for _ in range(3):
        out = await _run(graph)
        assert out["draft_down"]
    assert probes["n"] == 1  # the first run's probe tripped the breaker; later runs skip it
    assert draft.requests == []  # and no step request ever went to the dead server
