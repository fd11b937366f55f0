"""A large ``max_tokens`` bounds reasoning plus answer without starving the reasoning (F1).

Reasoning models are called with ``max_tokens`` of 16k-32k: that must leave ``budget`` and
``answer_max_tokens`` at their settings, and the reply says ``length`` only when ``max_tokens``
cut something (scripted servers, no network).
"""

from __future__ import annotations

import time

import pytest

from langchain_specreason import ChatSpecReason
from langchain_specreason.chat_model.arguments import budget_cut, call_config
from langchain_specreason.chat_model.run import Call, metadata
from langchain_specreason.config import SpecReasonConfig

from .fakes import WindowedScriptedEndpoint, is_judge, score, step

SETTINGS = {name: getattr(SpecReasonConfig(), name) for name in SpecReasonConfig.model_fields}


@pytest.mark.parametrize("max_tokens", [16000, 32768])
def test_a_large_max_tokens_keeps_the_budget_and_the_answer_cap_at_their_settings(max_tokens):
    settings = {**SETTINGS, "budget": 8192, "answer_max_tokens": 1024}
    config = call_config(dict(settings), {}, max_tokens)
    assert (config.budget, config.answer_max_tokens) == (8192, 1024)
    assert budget_cut(settings, {}, max_tokens) is None  # max_tokens cut nothing
    per_call = call_config(dict(settings), {"max_tokens": max_tokens}, None)
    assert (per_call.budget, per_call.answer_max_tokens) == (8192, 1024)


def test_a_small_max_tokens_still_shares_itself_between_reasoning_and_answer():
    settings = {**SETTINGS, "budget": 8192, "answer_max_tokens": 1024}
    config = call_config(dict(settings), {}, 20)
    assert (config.budget, config.answer_max_tokens) == (10, 10)
    assert budget_cut(settings, {}, 20) == 10
    # the budget binds: the answer gets the rest of max_tokens (within its own cap)
    config = call_config({**settings, "budget": 4}, {}, 20)
    assert (config.budget, config.answer_max_tokens) == (4, 16)
    assert budget_cut({**settings, "budget": 4}, {}, 20) is None


def _windowed_model(window: int, **kwargs) -> ChatSpecReason:
    def draft(request):  # ten tokens a step, never ending on its own
        n = min(10, request.max_tokens)
        return step("d " * n, n)

    def base(request):
        return score("9") if is_judge(request) else step("42", 2, end=True)

    return ChatSpecReason(
        draft_endpoint=WindowedScriptedEndpoint("draft", draft, window=window),
        base_endpoint=WindowedScriptedEndpoint("base", base, window=window),
        judge="score",
        lookahead=False,
        **kwargs,
    )


@pytest.mark.parametrize(("max_tokens", "window"), [(16000, 8192), (32768, 16384)])
async def test_a_large_max_tokens_on_a_window_smaller_than_it_still_reasons(max_tokens, window):
    model = _windowed_model(window, budget=40, max_tokens=max_tokens, repeat_window=0)
    msg = await model.ainvoke("one two three four five")
    meta = msg.response_metadata
    assert meta["specreason"]["steps_drafted"] == 4  # the whole budget of 40, 10 a step
    answer = model.base_endpoint.generation_calls()[-1]
    assert answer.max_tokens == 1024  # answer_max_tokens, not max_tokens less the budget


def _call(**kwargs) -> Call:
    fields = dict(
        graph=None,
        draft=None,
        base=None,
        draft_model=None,
        base_model=None,
        think=False,
        deadline=None,
        checkpointed=False,
        v1=False,
        stream_usage=True,
        stop=None,
        start=time.perf_counter(),
    )
    return Call(**{**fields, **kwargs})


def test_length_only_when_the_budget_max_tokens_set_was_reached():
    at_budget = {"stop": "budget", "tokens_used": 10, "steps": [], "budget": 10}
    # max_tokens set the budget (10) and the reasoning reached it: cut
    assert metadata(_call(budget_cap=10), at_budget, 0.1, False)["finish_reason"] == "length"
    # max_tokens left the budget setting (None): a budget stop is SpecReason's own
    assert metadata(_call(budget_cap=None), at_budget, 0.1, False)["finish_reason"] == "stop"
    # the servers' window lowered the budget below max_tokens' (nothing written past it)
    short = {"stop": "budget", "tokens_used": 0, "steps": [], "budget": 0}
    assert metadata(_call(budget_cap=10), short, 0.1, False)["finish_reason"] == "stop"
    # the answer cut by its own cap says so
    cut = {"stop": "end", "tokens_used": 3, "steps": [], "answer_finish": "length"}
    assert metadata(_call(budget_cap=None), cut, 0.1, False)["finish_reason"] == "length"
