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
    config = SpecReasonConfig(judge="score", answer_max_tokens=64)
    out = await create_specreason_graph(draft, base, config=config).ainvoke(QUESTION)
    assert (out["budget"], out["steps"], out["stop"]) == (0, [], "budget")
    assert draft.requests == []
    assert base.generation_calls()[-1].max_tokens == 20  # what the window leaves


async def test_a_conversation_that_does_not_fit_is_refused_before_any_generation():
    draft, base = _pair(window=PROMPT_RESERVE + 3)
    with pytest.raises(
        ContextLengthError,
        match="the conversation has 5 tokens; the servers' context window is 131",
    ):
        await create_specreason_graph(draft, base, config=SpecReasonConfig(judge="score")).ainvoke(
            QUESTION
        )
    assert draft.requests == [] and base.requests == []
