"""LangChain's agent middlewares against real failures of the cpu-test servers.

``ModelRetryMiddleware`` retries what ``is_retryable`` says (a 429, not a 401),
``ModelFallbackMiddleware`` moves on when the base server's port is dead, and
``SummarizationMiddleware``'s overflow path fires on a summary prompt longer than the base
server's window (max-model-len 4096). The 401 and 429 come from the fault proxy in front of
the real base server (tests/faultproxy.py: the shared servers run without a key; the 401 is
the body vLLM answers a wrong key with).
"""

from __future__ import annotations

import openai
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    ModelFallbackMiddleware,
    ModelRetryMiddleware,
    SummarizationMiddleware,
)
from langchain_core import exceptions as core
from langchain_core.messages import AIMessage, HumanMessage

from langchain_specreason import ChatSpecReason
from tests.faultproxy import FaultProxy

pytestmark = pytest.mark.integration

SMALL = {"budget": 16, "answer_max_tokens": 16, "temperature": 0.0, "max_retries": 0}


def _model(servers, base_url: str | None = None, **kwargs) -> ChatSpecReason:
    return ChatSpecReason(
        draft_url=servers.draft_url,
        base_url=base_url or servers.base_url,
        family=servers.family,
        **{**SMALL, **kwargs},
    )


def _faulted(proxy: FaultProxy) -> int:
    return sum(1 for seen in proxy.seen if seen.fault is not None)


def test_retry_middleware_does_not_retry_a_401(servers):
    with FaultProxy(servers.base_url) as proxy:
        proxy.inject("401", times=5)
        model = _model(servers, proxy.url)
        agent = create_agent(model, middleware=[ModelRetryMiddleware(max_retries=3)])
        with pytest.raises(core.ModelAuthenticationError) as caught:
            agent.invoke({"messages": [HumanMessage("What is 2+2?")]})
        assert isinstance(caught.value, openai.AuthenticationError)
        assert caught.value.is_retryable is False
        assert _faulted(proxy) == 1  # asked once: neither the endpoint nor the middleware retried


def test_a_429_is_the_sdks_rate_limit_error_and_the_retry_middleware_gets_the_answer(servers):
    with FaultProxy(servers.base_url) as proxy:
        proxy.inject("429", times=1, retry_after=0)
        model = _model(servers, proxy.url)
        with pytest.raises(openai.RateLimitError) as caught:  # max_retries=0: no retry inside
            model.invoke("What is 2+2?")
        assert isinstance(caught.value, core.ModelRateLimitError) and caught.value.is_retryable
        proxy.inject("429", times=1, retry_after=0)
        agent = create_agent(
            model, middleware=[ModelRetryMiddleware(max_retries=2, initial_delay=0.1)]
        )
        result = agent.invoke({"messages": [HumanMessage("What is 2+2?")]})
        assert isinstance(result["messages"][-1], AIMessage)
        assert result["messages"][-1].text.strip()
        assert _faulted(proxy) == 2


def test_fallback_middleware_moves_on_from_a_dead_port(servers):
    dead = _model(servers, "http://127.0.0.1:9/v1")
    with pytest.raises(core.ModelConnectionError) as caught:
        dead.invoke("What is 2+2?")
    assert isinstance(caught.value, openai.APIConnectionError) and caught.value.is_retryable
    agent = create_agent(dead, middleware=[ModelFallbackMiddleware(_model(servers))])
    result = agent.invoke({"messages": [HumanMessage("What is 2+2?")]})
    assert isinstance(result["messages"][-1], AIMessage)
    assert result["messages"][-1].text.strip()


def test_summarization_middleware_retries_a_summary_that_overflows_the_window(servers):
    model = _model(servers)
    filler = " ".join(f"item{i}" for i in range(600))  # ~2,700 tokens a message
    history = [
        HumanMessage(f"Remember this list: {filler}"),
        AIMessage("Noted."),
        HumanMessage(f"And this one too: {filler}"),
        AIMessage("Noted again."),
    ]
    # the summary prompt holds the whole history (~5,500 tokens): the base server's window
    # (4,096) refuses it as a ContextOverflowError, and the middleware retries it cut down
    overflow = model.get_num_tokens_from_messages(history)
    assert overflow > 4096
    with pytest.raises(core.ContextOverflowError):
        model.invoke([*history, HumanMessage("Summarize.")])
    summarize = SummarizationMiddleware(
        model, trigger=("messages", 4), keep=("messages", 1), trim_tokens_to_summarize=None
    )
    agent = create_agent(model, middleware=[summarize])
    result = agent.invoke({"messages": [*history, HumanMessage("What is 2+2?")]})
    texts = [m.text for m in result["messages"]]
    assert any("summary" in t.lower() for t in texts[:-1])  # the history was summarized
    assert isinstance(result["messages"][-1], AIMessage) and texts[-1].strip()


def test_a_fraction_summarization_middleware_builds_on_a_fresh_model_and_runs(servers):
    model = _model(servers)  # fresh: no call made yet
    # LangChain's docs build it right after the model; it reads profile["max_input_tokens"]
    summarize = SummarizationMiddleware(model, trigger=("fraction", 0.8))
    assert model.profile is not None and model.profile["max_input_tokens"] == 4096
    agent = create_agent(model, middleware=[summarize])
    result = agent.invoke({"messages": [HumanMessage("What is 2+2?")]})
    assert isinstance(result["messages"][-1], AIMessage) and result["messages"][-1].text.strip()
