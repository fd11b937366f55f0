"""``tokens_by_model`` and ``usage_by_model`` count the same server calls, so they agree in
both modes (F5; scripted servers, no network)."""

from __future__ import annotations

import pytest

from .test_chat_model import fake_model


def _check(meta: dict, usage: dict, draft: str = "draft", base: str = "base") -> None:
    by_model = meta["usage_by_model"]
    tokens = meta["tokens_by_model"]
    assert set(tokens) == {"draft", "base"}
    assert tokens == {
        "draft": by_model[draft]["output_tokens"],
        "base": by_model[base]["output_tokens"],
    }
    assert sum(tokens.values()) == usage["output_tokens"]


async def test_judge_mode_tokens_by_model_is_every_call_of_each_model():
    msg = await fake_model().ainvoke("What is 12*7?")
    # 4 drafted steps of 4 tokens; 3 judge readings of 1 token, a rewrite of 5, and the
    # answer (the instruct family's reply is the trace: no answer call here)
    assert msg.response_metadata["tokens_by_model"] == {"draft": 16, "base": 8}
    _check(msg.response_metadata, msg.usage_metadata)


@pytest.mark.parametrize("steps_ahead", [1, 3])
async def test_agree_mode_tokens_by_model_counts_the_bases_steps_at_agreed_positions(steps_ahead):
    model = fake_model(verify="agree", steps_ahead=steps_ahead)
    msg = await model.ainvoke("What is 12*7?")
    meta = msg.response_metadata
    _check(meta, msg.usage_metadata)
    base_steps = [r for r in model.base_endpoint.requests if r.stop and "\n\n" in r.stop]
    # every step the base wrote, agreed or not, is in its count
    assert meta["tokens_by_model"]["base"] >= 5 * len(base_steps) > 0
