"""The budget fits the servers' context window: no prompt can outgrow it (scripted servers)."""

from __future__ import annotations

import pytest

from langchain_specreason import ContextLengthError, SpecReasonConfig
from langchain_specreason.graph import create_specreason_graph
from langchain_specreason.graph.steps import PROMPT_RESERVE, fitted_budget

from .fakes import WindowedScriptedEndpoint, is_judge, score, step

QUESTION = {"messages": [("user", "one two three four five")]}  # 5 tokens by the fake count


def _pair(window: int) -> tuple[WindowedScriptedEndpoint, WindowedScriptedEndpoint]:
    def draft_step(request):  # ten tokens a step, fewer when max_tokens says so
        n = min(10, request.max_tokens)
        return step("d " * n, n)

    draft = WindowedScriptedEndpoint("draft", draft_step, window=window)
    base = WindowedScriptedEndpoint(
        "base",
        lambda r: score("9") if is_judge(r) else step("the answer", 2, end=True),
        window=window + 1000,
    )  # the smaller window of the two counts
    return draft, base


def test_the_budget_is_what_the_window_leaves_beside_the_conversation_and_the_answer():
    config = SpecReasonConfig(budget=8192, answer_max_tokens=100)
    assert fitted_budget(config, 4096, 50) == 4096 - 50 - PROMPT_RESERVE - 100
    assert fitted_budget(config, 100_000, 50) == 8192  # never above the configured budget
    assert fitted_budget(config, 300, 50) == 22
    assert fitted_budget(config, 250, 50) == 0  # only the answer fits


async def test_a_run_stops_at_the_fitted_budget_keeps_its_steps_and_answers_within_the_window():
    window = 5 + PROMPT_RESERVE + 64 + 35  # conversation, reserve, answer, 35 trace tokens
    draft, base = _pair(window)
    base.window = window
    config = SpecReasonConfig(
        judge="score", budget=8192, answer_max_tokens=64, step_max_tokens=10, repeat_window=0
    )
    out = await create_specreason_graph(draft, base, config=config).ainvoke(QUESTION)
    assert out["budget"] == 35
    assert out["stop"] == "budget"
    assert [s["tokens"] for s in out["steps"]] == [10, 10, 10, 5]  # the last step capped
    assert out["tokens_used"] == 35
    # every step request asked for no more than the room left; the answer fits the window
    asked = [r.max_tokens for r in draft.requests]
    assert asked == [10, 10, 10, 5]
    answer = base.generation_calls()[-1]
    assert answer.max_tokens == window - 5 - 35 - PROMPT_RESERVE == 64


async def test_no_room_for_thinking_goes_straight_to_the_answer():
    window = 5 + PROMPT_RESERVE + 20
    draft, base = _pair(window)
    base.window = window
    config = SpecReasonConfig(judge="score", answer_max_tokens=64)
    out = await create_specreason_graph(draft, base, config=config).ainvoke(QUESTION)
    assert (out["budget"], out["steps"], out["stop"]) == (0, [], "budget")
    assert draft.requests == []
    assert base.generation_calls()[-1].max_tokens == 20  # what the window leaves


async def test_a_conversation_that_does_not_fit_the_base_is_refused_before_any_generation():
    draft, base = _pair(window=PROMPT_RESERVE + 3)
    base.window = PROMPT_RESERVE + 3
    with pytest.raises(
        ContextLengthError,
        match="the conversation has 5 tokens; the base server's context window is 131",
    ):
        await create_specreason_graph(draft, base, config=SpecReasonConfig(judge="score")).ainvoke(
            QUESTION
        )
    assert draft.requests == [] and base.requests == []


async def test_a_conversation_too_long_for_the_draft_alone_is_written_by_the_base():
    # the draft's window is full with the conversation; the base's has room: the base writes
    # every step (it used to be refused as a whole, a run the base could finish)
    draft, base = _pair(window=PROMPT_RESERVE + 3)
    base.handler = lambda r: (
        score("9") if is_judge(r) else step("b b ", 2, end=len(base.requests) > 2)
    )
    config = SpecReasonConfig(judge="score", answer_max_tokens=64)
    graph = create_specreason_graph(draft, base, config=config)
    with pytest.warns(UserWarning, match="leaves no room in the draft server's context window"):
        out = await graph.ainvoke(QUESTION)
    assert draft.requests == []
    assert out["steps"] and {s["author"] for s in out["steps"]} == {"base"}
    assert "the base model writes every step" in out["draft_down"]
    assert out["budget"] == fitted_budget(config, base.window, 5)


async def test_each_server_counts_the_conversation_with_its_own_tokenizer():
    # the draft's tokenizer gives 3 tokens a word: 15 by the draft against 5 by the base
    draft, base = _pair(window=PROMPT_RESERVE + 40)
    base.window = 100_000
    draft.per_word = 3
    config = SpecReasonConfig(judge="score", budget=8192, answer_max_tokens=64, repeat_window=0)
    out = await create_specreason_graph(draft, base, config=config).ainvoke(QUESTION)
    # the draft's window less its own count of the conversation (the base writes the answer)
    assert out["budget"] == 40 - 15
    assert out["tokens_used"] == 25 and out["stop"] == "budget"
    assert [r.max_tokens for r in draft.requests] == [25, 15, 5]  # never past the draft's window


async def test_a_draft_context_length_error_mid_run_hands_the_steps_to_the_base():
    calls = {"n": 0}

    def draft_step(request):
        calls["n"] += 1
        if calls["n"] > 1:
            raise ContextLengthError("draft", "http://d/v1", "maximum context length exceeded")
        return step("d d ", 2)

    draft = WindowedScriptedEndpoint("draft", draft_step, window=100_000)
    base = WindowedScriptedEndpoint(
        "base",
        lambda r: score("9") if is_judge(r) else step("b b ", 2, end=len(r.messages) > 0),
        window=100_000,
    )
    config = SpecReasonConfig(judge="score", repeat_window=0)
    with pytest.warns(UserWarning, match="the base model writes the remaining steps"):
        out = await create_specreason_graph(draft, base, config=config).ainvoke(QUESTION)
    assert [s["author"] for s in out["steps"]][:1] == ["draft"]
    assert out["steps"][1]["author"] == "base"
    assert "maximum context length" in out["draft_down"]
    assert out["answer"]
