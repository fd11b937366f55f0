"""ChatOpenAI options with no counterpart are refused per call, as the constructor refuses
them: ``n`` other than 1, ``logprobs``, ``top_logprobs`` (scripted servers, no network)."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from langchain_specreason import ConfigError

from .test_chat_model import fake_model

MESSAGE = r"may not set {}: SpecReason sets them on each call.*{}: not supported \(one answer"


async def test_generate_with_n_2_is_refused_not_answered_once():
    model = fake_model()
    with pytest.raises(ConfigError, match=MESSAGE.format("n", "n")):
        await model.agenerate([[HumanMessage("What is 12*7?")]], n=2)
    with pytest.raises(ConfigError, match=MESSAGE.format("n", "n")):
        model.generate([[HumanMessage("What is 12*7?")]], n=2)
    assert not model.base_endpoint.requests  # refused before any server call


@pytest.mark.parametrize("how", ["ainvoke", "invoke", "stream", "astream"])
async def test_bound_logprobs_are_refused_not_dropped(how):
    llm = fake_model().bind(logprobs=True, top_logprobs=3)
    expected = MESSAGE.format("logprobs, top_logprobs", "logprobs, top_logprobs")
    with pytest.raises(ConfigError, match=expected):
        if how == "ainvoke":
            await llm.ainvoke("q")
        elif how == "invoke":
            llm.invoke("q")
        elif how == "stream":
            list(llm.stream("q"))
        else:
            [c async for c in llm.astream("q")]


def test_the_constructor_and_a_call_refuse_with_the_same_error():
    with pytest.raises(ConfigError) as built, pytest.warns(UserWarning):
        fake_model(logprobs=True)
    with pytest.raises(ConfigError) as called:
        fake_model().invoke("q", logprobs=True)
    assert type(built.value) is type(called.value)
    assert str(built.value).split(" may not set ")[1] == str(called.value).split(" may not set ")[1]


async def test_values_that_ask_for_nothing_pass():
    model = fake_model()
    msg = await model.ainvoke("What is 12*7?", n=1, logprobs=False, top_logprobs=None)
    assert msg.content == "S0.\n\nB1.\n\nS2."
