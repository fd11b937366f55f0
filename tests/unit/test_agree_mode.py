"""The ``agree`` mode: draft ahead, the base writes the same positions in parallel, keep the
longest agreeing prefix and then the base's own step (``verify`` node)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_specreason import SpecReasonConfig, SpecReasonStats
from langchain_specreason.endpoint import ChatRequest, Completion
from langchain_specreason.errors import EndpointError
from langchain_specreason.graph import create_specreason_graph

from .fakes import ScriptedEndpoint, partial_of, step

QUESTION = {"messages": [("user", "What is 12*7?")]}


def agree_config(**changes: object) -> SpecReasonConfig:
    return SpecReasonConfig(**{"verify": "agree", "steps_ahead": 3, "temperature": 0, **changes})


def writer(prefix: str, values: dict[int, int], end_at: int) -> Callable[[ChatRequest], Completion]:
    """Step i says ``<prefix> i: value v`` (v from ``values``, default 10*i); ends at end_at."""

    def handler(req: ChatRequest) -> Completion:
        index = partial_of(req).count("\n\n")
        value = values.get(index, 10 * index)
        return step(f"{prefix} step {index} gives {value}.", 5, end=index >= end_at)

    return handler


def positions(endpoint: ScriptedEndpoint) -> list[int]:
    return [partial_of(r).count("\n\n") for r in endpoint.requests]


async def run(draft_values: dict[int, int], end_at: int = 4, **changes: object):
    draft = ScriptedEndpoint("draft", writer("Draft", draft_values, end_at))
    base = ScriptedEndpoint("base", writer("Base", {}, end_at))
    graph = create_specreason_graph(draft, base, config=agree_config(**changes))
    out = await graph.ainvoke(QUESTION)
    return out, draft, base


async def test_all_agree_keeps_every_draft_step_and_never_judges():
    out, draft, base = await run({})
    assert [s["decision"] for s in out["steps"]] == ["accepted"] * 5
    assert [s["author"] for s in out["steps"]] == ["draft"] * 5
    assert out["steps"][-1]["text"] == "Draft step 4 gives 40."
    # rounds of 3: positions 0-2, then 3-4 (the trace ends at 4: the reply is the trace, no
    # answer call); the base wrote each position once, every call a step (no judge call)
    assert positions(draft) == [0, 1, 2, 3, 4]
    assert sorted(positions(base)) == [0, 1, 2, 3, 4]
    assert all(r.max_tokens > 1 for r in base.requests)
    verdict = out["steps"][1]["verdict"]
    assert verdict["rule"] == "result" and verdict["agree"] is True
    assert verdict["base_text"] == "Base step 1 gives 10."


async def test_the_first_position_disagreeing_keeps_the_base_step_and_drops_the_rest():
    out, draft, _ = await run({0: 7})
    first = out["steps"][0]
    assert first["decision"] == "rewritten" and first["author"] == "base"
    assert first["text"] == "Base step 0 gives 0.\n\n"
    assert first["draft_text"] == "Draft step 0 gives 7.\n\n"
    assert [s["decision"] for s in out["steps"][1:]] == ["accepted"] * 4
    # the next round starts on the base's step: step 1 drafted after it
    assert any("Base step 0 gives 0." in partial_of(r) for r in draft.requests)
    assert SpecReasonStats.from_state(out).steps_rewritten == 1


async def test_a_disagreement_in_the_middle_keeps_the_prefix_then_the_base_step():
    out, _, _ = await run({1: 99})
    assert [s["decision"] for s in out["steps"][:3]] == ["accepted", "rewritten", "accepted"]
    assert out["steps"][1]["text"] == "Base step 1 gives 10.\n\n"
    assert out["steps"][1]["verdict"]["position"] == 1
    # the round's second step is the base's: the draft's third step (built on the rejected
    # second) is not in the trace; step 2 was drafted again in the next round
    assert out["steps"][2]["verdict"]["position"] == 0


async def test_work_built_on_a_rejected_step_is_cancelled_at_once():
    gate = asyncio.Event()
    cancelled: list[tuple[str, int]] = []
    hanging: list[str] = []
    both_hang = asyncio.Event()

    class Slow(ScriptedEndpoint):
        async def complete(self, request: ChatRequest) -> Completion:
            if self.name == "base" and partial_of(request) == "":
                await asyncio.wait_for(both_hang.wait(), timeout=5)  # answers position 0 last
            if "gives 5." in partial_of(request):  # built on the rejected draft step 0
                hanging.append(self.name)
                if len(hanging) == 2:
                    both_hang.set()
                try:
                    await gate.wait()  # never set: only a cancellation ends these
                except asyncio.CancelledError:
                    cancelled.append((self.name, partial_of(request).count("\n\n")))
                    raise
            return await super().complete(request)

    draft = Slow("draft", writer("Draft", {0: 5}, 4))
    base = Slow("base", writer("Base", {}, 4))
    graph = create_specreason_graph(draft, base, config=agree_config(steps_ahead=3))
    out = await asyncio.wait_for(graph.ainvoke(QUESTION, {"recursion_limit": 200}), timeout=10)
    assert out["steps"][0]["decision"] == "rewritten"
    # position 0 disagreed while the draft wrote step 1 and the base position 1, both built
    # on the rejected draft step 0: both cancelled, not awaited (they never answer)
    assert sorted(cancelled) == [("base", 1), ("draft", 1)]


async def test_a_run_interrupted_in_the_middle_of_a_round_resumes_without_new_calls():
    draft = ScriptedEndpoint("draft", writer("Draft", {2: 1}, 4))
    base = ScriptedEndpoint("base", writer("Base", {}, 4))
    graph = create_specreason_graph(
        draft, base, config=agree_config(), checkpointer=InMemorySaver()
    )
    thread = {"configurable": {"thread_id": "mid-round"}}
    await graph.ainvoke(QUESTION, thread, interrupt_after=["accept"])
    saved = await graph.aget_state(thread)
    assert len(saved.values["steps"]) == 1
    assert [p["text"] for p in saved.values["verified"]] == [
        "Draft step 1 gives 10.\n\n",
        "Draft step 2 gives 1.\n\n",
    ]
    calls = len(draft.requests), len(base.requests)
    await graph.ainvoke(None, thread, interrupt_after=["rewrite"])
    saved = await graph.aget_state(thread)
    assert [s["decision"] for s in saved.values["steps"]] == ["accepted", "accepted", "rewritten"]
    assert (len(draft.requests), len(base.requests)) == calls  # the queue, no server asked
    out = await graph.ainvoke(None, thread)
    assert [s["text"] for s in out["steps"]][-1] == "Draft step 4 gives 40."


def failing_from(position: int, end_at: int = 6) -> Callable[[ChatRequest], Completion]:
    """A draft that writes positions before ``position`` and fails from it on."""

    def handler(req: ChatRequest) -> Completion:
        if partial_of(req).count("\n\n") >= position:
            raise EndpointError("draft", "http://d/v1", "draft server died")
        return writer("Draft", {}, end_at)(req)

    return handler


async def through_outage(
    draft_handler: Callable[[ChatRequest], Completion], end_at: int = 6
) -> tuple[dict, list[dict], ScriptedEndpoint]:
    """A run whose draft fails (no cooldown): its final state, its events, the base."""
    draft = ScriptedEndpoint("draft", draft_handler)
    base = ScriptedEndpoint("base", writer("Base", {}, end_at))
    graph = create_specreason_graph(draft, base, config=agree_config(draft_cooldown=0))
    events, out = [], {}
    with pytest.warns(UserWarning, match="draft server died"):
        async for mode, event in graph.astream(QUESTION, stream_mode=["custom", "values"]):
            if mode == "custom":
                events.append(event)
            else:
                out = event
    return out, events, base


async def test_a_draft_outage_in_a_round_keeps_the_agreed_steps_and_the_base_goes_on():
    out, events, _ = await through_outage(failing_from(1, end_at=4), end_at=4)
    assert [s["decision"] for s in out["steps"]] == ["accepted", "base", "base", "base", "base"]
    assert out["draft_down"] and "draft server died" in out["draft_down"]
    assert [e["type"] for e in events].count("fallback") == 1


async def test_stream_events_say_who_wrote_each_step():
    draft = ScriptedEndpoint("draft", writer("Draft", {1: 3}, 2))
    base = ScriptedEndpoint("base", writer("Base", {}, 2))
    graph = create_specreason_graph(draft, base, config=agree_config())
    steps = [
        (e["step"], e["decision"], e["author"])
        async for e in graph.astream(QUESTION, stream_mode="custom")
        if e["type"] == "step"
    ]
    assert steps == [(0, "accepted", "draft"), (1, "rewritten", "base"), (2, "accepted", "draft")]


async def test_the_budget_caps_the_round_and_stops_the_trace():
    out, draft, _ = await run({}, end_at=50, budget=12)  # 5 tokens a step: 3 steps spend 15
    assert out["stop"] == "budget"
    assert len(out["steps"]) == 3
    assert draft.requests[2].max_tokens == 2  # what is left of the budget after two steps


def test_the_config_round_trips_through_a_file(tmp_path):
    config = agree_config(agree_rule="numbers", agree_overlap=0.7, steps_ahead=4)
    path = tmp_path / "agree.toml"
    path.write_text(config.to_toml())
    assert SpecReasonConfig.from_file(path) == config
    assert SpecReasonConfig.from_env({"SPECREASON_VERIFY": "agree"}).verify == "agree"


async def test_each_round_says_where_its_time_went():
    from langchain_specreason.lab.bench.rounds import round_records, rounds_markdown

    out, _, _ = await run({1: 99})  # round 1: steps 0 (agreed) and 1 (the base's)
    rounds = round_records(out["steps"])
    assert [r["steps"] for r in rounds] == [2, 3]  # then steps 2-4: all agree, the trace ends
    assert [r["agreed"] for r in rounds] == [1, 3]
    assert rounds[0]["base_requests"] >= 2
    assert all(r["round_s"] >= r["draft_wait_s"] for r in rounds)
    table = rounds_markdown({"agree result steps_ahead=3": [{"rounds": rounds}], "base": [{}]})
    assert "| agree result steps_ahead=3 | 2 | 2.50 |" in table
    assert "| base |" not in table


async def test_a_draft_outage_late_in_a_round_keeps_every_agreed_step_and_the_base_step():
    """steps_ahead=3, the draft dies writing position 2: positions 0 and 1 agreed and are both
    kept; the base's step at position 2, asked for before the outage, is kept, not asked again;
    the fallback names position 2."""
    out, events, base = await through_outage(failing_from(2))
    decisions = [s["decision"] for s in out["steps"]]
    assert decisions[:3] == ["accepted", "accepted", "base"]
    assert out["steps"][2]["text"] == "Base step 2 gives 20.\n\n"
    assert out["steps"][2]["draft_text"] is None and out["steps"][2]["score"] is None
    assert sorted(positions(base)).count(2) == 1  # the base's step 2 was written once
    fallback = [e for e in events if e["type"] == "fallback"]
    assert [e["step"] for e in fallback] == [2]


async def test_a_draft_outage_at_the_first_position_keeps_the_base_step_already_asked():
    out, _, base = await through_outage(failing_from(0), end_at=1)
    assert [s["decision"] for s in out["steps"]] == ["base", "base"]
    assert positions(base).count(0) == 1


async def test_agreed_positions_count_the_base_tokens_that_usage_counts():
    """The base wrote its own step at every agreed position: the stats count those tokens."""
    out, _, base = await run({}, end_at=2)
    stats = SpecReasonStats.from_state(out)
    written = sum(r.max_tokens > 0 for r in base.requests) * 5  # each scripted step: 5 tokens
    assert stats.base_tokens == written == 15
    assert all(s["base_tokens"] == 5 for s in out["steps"])


async def test_the_rule_reads_the_base_step_as_it_would_join_the_trace():
    """The draft's step carries its delimiter back; the base's is compared in the same form, so
    a final ``42.`` line reads the same on both sides."""

    def handler(prefix: str) -> Callable[[ChatRequest], Completion]:
        return lambda req: step(f"{prefix} so the answer is\n42.", 5, end=False)

    draft = ScriptedEndpoint("draft", handler("Draft"))
    base = ScriptedEndpoint("base", handler("Base"))
    graph = create_specreason_graph(draft, base, config=agree_config(budget=5))
    out = await graph.ainvoke(QUESTION)
    assert out["steps"][0]["decision"] == "accepted"


async def test_a_custom_judge_with_the_agree_mode_is_refused():
    from langchain_specreason.errors import ConfigError
    from langchain_specreason.judges import Verdict

    class Always:
        async def judge(self, ctx):
            return Verdict(score=9, accept=True)

    with pytest.raises(ConfigError, match="custom judge"):
        create_specreason_graph(
            ScriptedEndpoint("d", writer("D", {}, 1)),
            ScriptedEndpoint("b", writer("B", {}, 1)),
            config=agree_config(),
            judge=Always(),
        )


async def test_cancelling_a_round_during_its_cleanup_is_not_swallowed(monkeypatch):
    """The round cancelled while it waits for its cancelled work to end: the cancellation
    passes (the old cleanup suppressed it and returned the round as if done)."""
    from langchain_specreason.formats import get_format
    from langchain_specreason.graph import Parts
    from langchain_specreason.graph.verifiers import agree, make_verifier

    monkeypatch.setattr(agree, "get_stream_writer", lambda: lambda event: None)  # no graph here

    release, cleaning, asked = asyncio.Event(), asyncio.Event(), asyncio.Event()

    class Slow(ScriptedEndpoint):
        async def complete(self, request: ChatRequest) -> Completion:
            self.requests.append(request)
            if partial_of(request).count("\n\n") >= 1:
                asked.set()
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    cleaning.set()
                    await release.wait()  # a slow cancellation: the cleanup waits on it
                    raise
            await asked.wait()  # position 0 answers once position 1 is being written
            return writer("Base", {0: 7}, 5)(request)

    config = agree_config()
    draft = ScriptedEndpoint("draft", writer("Draft", {}, 5))
    base = Slow("base", writer("Base", {}, 5))
    parts = Parts(
        draft,
        base,
        make_verifier(config, draft, base, get_format("instruct")),
        config,
        get_format("instruct"),
    )
    state = {"messages": [HumanMessage("What is 12*7?")], "steps": [], "budget": 100}
    task = asyncio.ensure_future(parts.verifier.round(parts, state, {}))
    await asyncio.wait_for(cleaning.wait(), 5)  # position 0 disagreed: the round cleans up
    task.cancel()
    await asyncio.sleep(0)
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
