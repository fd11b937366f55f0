"""Control flow of the SpecReason graph, pinned with scripted endpoints (no network)."""

from __future__ import annotations

import itertools

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from langchain_specreason import InputError, SpecReasonConfig, SpecReasonStats
from langchain_specreason.endpoint import ChatRequest, Completion
from langchain_specreason.graph import NODES, create_specreason_graph

from .fakes import ScriptedEndpoint, is_judge, partial_of, score, step

SCORE = SpecReasonConfig(judge="score")
"""These tests pin the control flow with SpecReason's 0-9 score judge (scripted digits)."""
QUESTION = {"messages": [("user", "What is 12*7?")]}


def draft_of(texts: list[str], *, end_at: int | None = None, tokens: int = 5):
    """A draft that writes texts[i] as step i; the step at index end_at ends the message."""

    def handler(req: ChatRequest) -> Completion:
        index = partial_of(req).count("\n\n")
        text = texts[min(index, len(texts) - 1)]
        return step(text, tokens, end=end_at is not None and index >= end_at)

    return handler


def base_of(
    digit: str = "9",
    *,
    texts: list[str] | None = None,
    end_at: int | None = None,
    answer: str = "The answer is 84.",
):
    def handler(req: ChatRequest) -> Completion:
        if is_judge(req):
            return score(digit)
        if req.stop is None:  # the answer call
            return Completion(text=answer, finish_reason="stop", completion_tokens=6, seconds=0.01)
        index = partial_of(req).count("\n\n")
        rewrite = (texts or ["Base step."])[min(index, len(texts or ["x"]) - 1)]
        return step(f"{rewrite} #{index}", 7, end=end_at is not None and index >= end_at)

    return handler


async def test_threshold_zero_keeps_every_draft_and_base_only_judges():
    draft = ScriptedEndpoint("draft", draft_of(["First.", "Second.", "So 84."], end_at=2))
    base = ScriptedEndpoint("base", base_of("0"))
    graph = create_specreason_graph(
        draft, base, config=SpecReasonConfig(judge="score", threshold=0)
    )
    out = await graph.ainvoke(QUESTION)
    assert [s["decision"] for s in out["steps"]] == ["accepted", "accepted", "accepted"]
    assert out["answer"] == "First.\n\nSecond.\n\nSo 84."
    assert out["stop"] == "end"
    assert len(base.judge_calls()) == 3
    assert base.generation_calls() == []  # instruct reply ended by itself: no answer call
    assert out["messages"][-1].content == out["answer"]


async def test_threshold_ten_rewrites_every_step():
    draft = ScriptedEndpoint("draft", draft_of(["Bad.", "Worse."]))
    base = ScriptedEndpoint("base", base_of("9", texts=["Good."], end_at=1))
    graph = create_specreason_graph(
        draft, base, config=SpecReasonConfig(judge="score", threshold=10)
    )
    out = await graph.ainvoke(QUESTION)
    assert [s["decision"] for s in out["steps"]] == ["rewritten", "rewritten"]
    assert [s["author"] for s in out["steps"]] == ["base", "base"]
    assert out["steps"][0]["draft_text"] == "Bad.\n\n"
    assert out["steps"][0]["score"] == 9.0
    assert out["answer"] == "Good. #0\n\nGood. #1"
    stats = SpecReasonStats.from_state(out)
    assert (stats.steps_drafted, stats.steps_accepted, stats.steps_rewritten) == (2, 0, 2)
    assert stats.draft_tokens == 10 and stats.base_tokens == 14
    assert stats.acceptance_rate == 0.0


async def test_score_at_threshold_is_kept_below_is_rewritten():
    digits = iter(["7", "6"])
    draft = ScriptedEndpoint("draft", draft_of(["A.", "B."], end_at=1))

    def base_handler(req: ChatRequest) -> Completion:
        if is_judge(req):
            return score(next(digits))
        return step("Base wrote this.", 4, end=True)

    base = ScriptedEndpoint("base", base_handler)
    out = await create_specreason_graph(draft, base, config=SCORE).ainvoke(QUESTION)
    assert [s["decision"] for s in out["steps"]] == ["accepted", "rewritten"]
    assert out["answer"] == "A.\n\nBase wrote this."


async def test_first_n_base_steps_are_never_drafted():
    draft = ScriptedEndpoint("draft", draft_of(["D0", "D1", "D2", "Done."], end_at=3))
    base = ScriptedEndpoint("base", base_of("9", texts=["B"]))
    graph = create_specreason_graph(
        draft, base, config=SpecReasonConfig(judge="score", first_n_base_steps=2)
    )
    out = await graph.ainvoke(QUESTION)
    assert [s["decision"] for s in out["steps"]] == ["base", "base", "accepted", "accepted"]
    assert out["steps"][0]["score"] is None
    assert len(draft.requests) == 2
    assert len(base.judge_calls()) == 2
    assert out["answer"].startswith("B #0\n\nB #1\n\nD2\n\n")


@pytest.mark.parametrize("budget", [1, 5, 9, 10, 11])
async def test_budget_caps_kept_tokens_exactly(budget):
    texts = [f"Step {i}." for i in range(50)]
    draft = ScriptedEndpoint(
        "draft", lambda r: step(texts[partial_of(r).count("\n\n")], tokens=min(5, r.max_tokens))
    )
    base = ScriptedEndpoint("base", base_of("9", answer="Final."))
    out = await create_specreason_graph(
        draft, base, config=SpecReasonConfig(judge="score", budget=budget)
    ).ainvoke(QUESTION)
    assert out["stop"] == "budget"
    assert out["tokens_used"] == budget  # the last step is capped at the room left
    assert [r.max_tokens for r in draft.requests][-1] == budget - 5 * (len(draft.requests) - 1)
    # budget spent on an instruct reply: the base model finishes it (one answer call)
    answer_calls = base.generation_calls()
    assert len(answer_calls) == 1 and answer_calls[0].stop is None
    assert out["answer"].endswith("Final. ")


async def test_step_cap_continues_without_delimiter():
    def handler(req: ChatRequest) -> Completion:
        if partial_of(req):
            return step(" rest.", 3, end=True)
        return Completion(text="A very long", finish_reason="length", completion_tokens=4)

    draft = ScriptedEndpoint("draft", handler)
    base = ScriptedEndpoint("base", base_of("9"))
    out = await create_specreason_graph(
        draft, base, config=SpecReasonConfig(judge="score", step_max_tokens=4)
    ).ainvoke(QUESTION)
    assert [s["finish"] for s in out["steps"]] == ["length", "end"]
    assert out["answer"] == "A very long rest."
    assert draft.requests[0].max_tokens == 4


async def test_cycle_of_several_steps_stops_as_repeat():
    cycle = ["Check a.", "Check b.", "Check c."]
    draft = ScriptedEndpoint("draft", lambda r: step(cycle[partial_of(r).count("\n\n") % 3]))
    base = ScriptedEndpoint("base", base_of("9", answer="84"))
    out = await create_specreason_graph(draft, base, config=SCORE).ainvoke(QUESTION)
    assert out["stop"] == "repeat"
    assert len(out["steps"]) == 3  # the fourth step repeats the first and is dropped
    assert out["repeats"] == 1
    assert SpecReasonStats.from_state(out).steps_dropped == 1


async def test_repeat_window_zero_never_stops_on_repeats():
    draft = ScriptedEndpoint("draft", lambda r: step("Same.", 5))
    base = ScriptedEndpoint("base", base_of("9", answer="x"))
    out = await create_specreason_graph(
        draft, base, config=SpecReasonConfig(judge="score", repeat_window=0, budget=20)
    ).ainvoke(QUESTION)
    assert out["stop"] == "budget" and len(out["steps"]) == 4


async def test_blank_draft_goes_to_base_without_judging():
    draft = ScriptedEndpoint("draft", lambda r: step("", 1))
    base = ScriptedEndpoint("base", base_of("9", texts=["Real."], end_at=0))
    out = await create_specreason_graph(draft, base, config=SCORE).ainvoke(QUESTION)
    assert base.judge_calls() == []
    assert out["steps"][0]["decision"] == "rewritten"
    assert out["answer"] == "Real. #0"


async def test_think_family_closes_thinking_and_streams_answer_from_base():
    def draft_handler(req: ChatRequest) -> Completion:
        assert req.continue_final and partial_of(req).startswith("<think>\n")
        n = partial_of(req).count("\n\n")
        if n == 0:
            return step("12*7 = 84.", 6)
        return step("Done thinking.", 3, stop="</think>")

    draft = ScriptedEndpoint("draft", draft_handler)
    base = ScriptedEndpoint("base", base_of("8", answer="**84**"))
    graph = create_specreason_graph(draft, base, family="think", config=SCORE)
    events = [chunk async for chunk in graph.astream(QUESTION, stream_mode="custom")]
    kinds = [e["type"] for e in events]
    assert kinds.index("done") < kinds.index("answer_delta")
    final = await graph.ainvoke(QUESTION)
    assert final["stop"] == "thinking_end"
    answer_request = base.generation_calls()[-1]
    assert answer_request.messages[-1]["content"] == (
        "<think>\n12*7 = 84.\n\nDone thinking.</think>\n\n"
    )
    assert final["answer"] == "**84** "
    message = final["messages"][-1]
    assert message.additional_kwargs["reasoning_content"] == "12*7 = 84.\n\nDone thinking."
    # judge prompt keeps the thinking open and pre-fills the digit
    judge = base.judge_calls()[0]
    assert "</think>" not in judge.messages[-3]["content"]
    assert judge.messages[-1] == {"role": "assistant", "content": "Score: "}


async def test_prefixes_are_byte_stable_across_calls():
    draft = ScriptedEndpoint("draft", draft_of(["One.", "Two.", "Three."], end_at=2))
    base = ScriptedEndpoint("base", base_of("9"))
    await create_specreason_graph(draft, base, config=SCORE).ainvoke(QUESTION)
    partials = [partial_of(r) for r in draft.requests]
    for earlier, later in itertools.pairwise(partials):
        assert later.startswith(earlier)
    judged = [j.messages[-3]["content"] for j in base.judge_calls()]
    assert judged == ["One.\n\n", "One.\n\nTwo.\n\n", "One.\n\nTwo.\n\nThree."]


async def test_stream_events_order_per_step():
    draft = ScriptedEndpoint("draft", draft_of(["One.", "Two."], end_at=1))
    base = ScriptedEndpoint("base", base_of("3", texts=["B."], end_at=1))
    graph = create_specreason_graph(draft, base, config=SCORE)
    events = [e async for e in graph.astream(QUESTION, stream_mode="custom")]
    assert [(e["type"], e.get("step")) for e in events] == [
        ("drafted", 0),
        ("scored", 0),
        ("step", 0),
        ("drafted", 1),
        ("scored", 1),
        ("step", 1),
        ("done", None),
    ]
    assert events[2]["decision"] == "rewritten" and events[2]["score"] == 3.0


async def test_empty_conversation_is_a_typed_error():
    draft = ScriptedEndpoint("draft", draft_of(["x"]))
    base = ScriptedEndpoint("base", base_of())
    graph = create_specreason_graph(draft, base, config=SCORE)
    with pytest.raises(InputError, match="empty"):
        await graph.ainvoke({"messages": []})
    with pytest.raises(InputError, match="no user message"):
        await graph.ainvoke({"messages": [("system", "be brief")]})
    assert draft.requests == [] and base.requests == []


async def test_resume_after_a_server_failure_loses_no_step():
    failures = {"left": 2}

    def flaky_draft(req: ChatRequest) -> Completion:
        index = partial_of(req).count("\n\n")
        if index == 2 and failures["left"]:
            # down for two calls: the lookahead drafting step 2 during step 1's judging
            # (its error is dropped), then the draft node's own call (raised)
            failures["left"] -= 1
            raise ConnectionError("draft server died")
        return step(f"S{index}.", 5, end=index == 3)

    draft = ScriptedEndpoint("draft", flaky_draft)
    base = ScriptedEndpoint("base", base_of("9"))
    graph = create_specreason_graph(draft, base, checkpointer=InMemorySaver(), config=SCORE)
    thread = {"configurable": {"thread_id": "t1"}}
    with pytest.raises(ConnectionError, match="draft server died"):
        await graph.ainvoke(QUESTION, thread)
    saved = await graph.aget_state(thread)
    assert [s["text"] for s in saved.values["steps"]] == ["S0.\n\n", "S1.\n\n"]
    assert saved.next == ("verify",)
    out = await graph.ainvoke(None, thread)
    assert [s["text"] for s in out["steps"]] == ["S0.\n\n", "S1.\n\n", "S2.\n\n", "S3."]
    assert len(base.judge_calls()) == 4  # the two finished steps were not judged again
    drafted = [partial_of(r).count("\n\n") for r in draft.requests]
    assert drafted.count(0) == drafted.count(1) == 1  # nor drafted again


async def test_new_question_on_same_thread_starts_a_fresh_trace():
    draft = ScriptedEndpoint("draft", draft_of(["Only."], end_at=0))
    base = ScriptedEndpoint("base", base_of("9"))
    graph = create_specreason_graph(draft, base, checkpointer=InMemorySaver(), config=SCORE)
    thread = {"configurable": {"thread_id": "t2"}}
    await graph.ainvoke(QUESTION, thread)
    out = await graph.ainvoke({"messages": [("user", "And 13*7?")]}, thread)
    assert len(out["steps"]) == 1
    roles = [m.type for m in out["messages"]]
    assert roles == ["human", "ai", "human", "ai"]
    # the second draft saw the whole conversation, the first answer included
    assert [m["role"] for m in draft.requests[-1].messages] == ["user", "assistant", "user"]


def test_node_names_and_mermaid_diagram(snapshot):
    graph = create_specreason_graph(
        ScriptedEndpoint("d", draft_of(["x"])), ScriptedEndpoint("b", base_of()), config=SCORE
    )
    drawable = graph.get_graph()
    assert set(drawable.nodes) == {"__start__", "__end__", *NODES}
    assert drawable.draw_mermaid() == snapshot


async def test_client_leaving_the_stream_mid_run_resumes_to_the_answer():
    """A consumer that stops reading after a kept step cancels the run inside that node's task.

    The checkpoint must still say where to go next: the step's state and its route are
    written together, so the resumed run goes on drafting instead of ending with no answer.
    """
    draft = ScriptedEndpoint("draft", draft_of(["S0.", "S1.", "S2.", "S3."], end_at=3))
    base = ScriptedEndpoint("base", base_of("9"))
    graph = create_specreason_graph(draft, base, checkpointer=InMemorySaver(), config=SCORE)
    thread = {"configurable": {"thread_id": "leave"}}
    seen: list[str] = []
    stream = graph.astream(QUESTION, thread, stream_mode="custom")
    async for event in stream:
        if event["type"] == "step":
            seen.append(event["text"])
            if len(seen) == 2:
                break
    await stream.aclose()  # what an HTTP server does when its client leaves: cancels the run
    drafted_before = len(draft.requests)
    out = await graph.ainvoke(None, thread)
    assert [s["text"] for s in out["steps"]] == ["S0.\n\n", "S1.\n\n", "S2.\n\n", "S3."]
    assert out["stop"] == "end"
    assert out["answer"] == "S0.\n\nS1.\n\nS2.\n\nS3."
    resumed = [partial_of(r).count("\n\n") for r in draft.requests[drafted_before:]]
    assert 0 not in resumed and 1 not in resumed  # the two kept steps were not redone


async def test_a_dead_draft_server_hands_the_remaining_steps_to_the_base():
    from langchain_specreason.errors import EndpointError

    calls = {"n": 0}

    def dying_draft(req):
        calls["n"] += 1
        if partial_of(req).count("\n\n") >= 1:
            raise EndpointError("draft", "http://d/v1", "unreachable after 3 attempts")
        return step("D0.", 4)

    def base(req):
        if is_judge(req):
            return score("9")
        index = partial_of(req).count("\n\n")
        return step(f"B{index}.", 5, end=index == 2)

    graph = create_specreason_graph(
        ScriptedEndpoint("draft", dying_draft),
        ScriptedEndpoint("base", base),
        config=SpecReasonConfig(judge="score", lookahead=False),
    )
    events = []
    out = None
    async for mode, chunk in graph.astream(QUESTION, stream_mode=["custom", "values"]):
        if mode == "custom":
            events.append(chunk)
        else:
            out = chunk
    assert out is not None
    assert [(s["author"], s["decision"]) for s in out["steps"]] == [
        ("draft", "accepted"),
        ("base", "base"),
        ("base", "base"),
    ]
    assert out["answer"].endswith("B2.")
    assert out["draft_down"].startswith("draft endpoint at http://d/v1")
    fallbacks = [e for e in events if e["type"] == "fallback"]
    assert len(fallbacks) == 1 and fallbacks[0]["step"] == 1
    assert calls["n"] == 2  # no draft call after it failed
    from langchain_specreason import SpecReasonStats

    assert SpecReasonStats.from_state(out).draft_down == out["draft_down"]


def test_console_prints_the_fallback_and_log_probability_scores():
    from langchain_specreason.cli.console import format_event

    line = format_event(
        {
            "type": "fallback",
            "step": 3,
            "endpoint": "draft",
            "reason": "draft endpoint at http://d/v1: unreachable",
        }
    )
    assert line == (
        "  step  3 draft server failed; the base model writes the rest "
        "(draft endpoint at http://d/v1: unreachable)"
    )
    assert (
        format_event(
            {"type": "scored", "step": 2, "score": -4.25, "accepted": False, "seconds": 1.0}
        )
        == "  step  2 scored   -4.2 -> reject (1.0 s)"
    )
