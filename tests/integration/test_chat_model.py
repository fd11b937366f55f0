"""ChatSpecReason on the real cpu-test servers: streaming order, metadata, token counting."""

from __future__ import annotations

import asyncio
import os

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from langchain_specreason import ChatRequest, ChatSpecReason, ContextLengthError, OpenAIEndpoint

pytestmark = pytest.mark.integration


def make(servers, **kwargs) -> ChatSpecReason:
    params = {
        "draft_url": servers.draft_url,
        "base_url": servers.base_url,
        "temperature": 0,
        "seed": 0,
        "budget": 40,
        "step_max_tokens": 24,
        "max_tokens": 32,
        **kwargs,
    }
    return ChatSpecReason(**params)


async def test_think_stream_reasoning_steps_first_each_once_then_answer(servers):
    model = make(servers, family="think")
    chunks = [c async for c in model.astream("What is 12*7? Think it through.")]
    kinds = [
        "reasoning"
        if c.additional_kwargs.get("reasoning_content")
        else "answer"
        if c.content
        else "meta"
        for c in chunks
    ]
    assert "reasoning" in kinds and "answer" in kinds
    first_answer = kinds.index("answer")
    assert "reasoning" not in kinds[first_answer:]
    full = chunks[0]
    for chunk in chunks[1:]:
        full = full + chunk
    stats = full.response_metadata["specreason"]
    steps = [
        c.additional_kwargs["reasoning_content"]
        for c in chunks
        if c.additional_kwargs.get("reasoning_content")
    ]
    assert len(steps) == stats["steps_accepted"] + stats["steps_rewritten"] + stats["steps_base"]
    assert full.additional_kwargs["reasoning_content"] == "".join(steps)
    assert full.content_blocks[0]["type"] == "reasoning"
    assert full.usage_metadata["output_token_details"]["reasoning"] == stats["trace_tokens"]
    # max_tokens=32 bounds reasoning plus answer: the answer's share is 16, the reasoning's
    # budget 32 - 16. "length" exactly when either was cut: the answer reached its 16 tokens,
    # or the reasoning stopped on its budget
    assert stats["trace_tokens"] + stats["answer_tokens"] <= 32
    finish = full.response_metadata["finish_reason"]
    cut = stats["answer_tokens"] == 16 or stats["stop"] == "budget"
    assert finish == ("length" if cut else "stop")


def test_sync_invoke_reports_usage_and_per_model_tokens(servers):
    msg = make(servers).invoke([HumanMessage("Name three primary colours.")])
    assert msg.content.strip()
    usage = msg.usage_metadata
    assert usage["input_tokens"] > 5
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    split = msg.response_metadata["tokens_by_model"]
    assert split["draft"] + split["base"] > 0
    # every server call counted, by served model; vLLM reports its prefix-cache hits
    by_model = msg.response_metadata["usage_by_model"]
    assert set(by_model) == {"smollm2-135m", "qwen2.5-coder-0.5b"}  # cpu-test's served names
    assert sum(u["output_tokens"] for u in by_model.values()) == usage["output_tokens"]
    assert usage["output_tokens"] >= split["draft"] + split["base"]
    assert "cache_read" in usage["input_token_details"]


async def test_token_count_is_exact_from_the_server(servers):
    model = make(servers)
    question = "Hello there, how are you today?"
    messages = [SystemMessage("You are terse."), HumanMessage(question)]
    exact = model.get_num_tokens_from_messages(messages)
    base = OpenAIEndpoint(servers.base_url, name="base")
    done = await base.complete(
        ChatRequest(
            [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": question},
            ],
            max_tokens=1,
        )
    )
    assert exact == done.prompt_tokens  # what the server itself counted for this prompt
    # without a system message the template adds its default one; the count leaves it out,
    # so it never exceeds a list that adds a message (what trimmers assume)
    alone = model.get_num_tokens_from_messages([HumanMessage(question)])
    rendered = await base.count_tokens([{"role": "user", "content": question}])
    assert alone < rendered and alone <= exact
    offline = ChatSpecReason(draft_url="http://127.0.0.1:9/v1", base_url="http://127.0.0.1:9/v1")
    assert 10 < offline.get_num_tokens_from_messages(messages) < 40  # the offline estimate


async def test_conversation_longer_than_the_window_is_refused_before_generation(servers):
    model = make(servers)
    window = await OpenAIEndpoint(servers.base_url, name="base").max_model_len()
    assert window
    with pytest.raises(ContextLengthError, match=f"context window is {window}"):
        await model.ainvoke("word " * (window + 1000))


def test_default_settings_fit_the_servers_window(servers, monkeypatch):
    """The README's external-server mode with every knob at its default: only the two URLs
    are set. The default budget (8192) is more than the cpu-test window holds; the run fits
    it instead of failing on an over-long prompt."""
    for name in list(os.environ):
        if name.startswith("SPECREASON_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SPECREASON_DRAFT_URL", servers.draft_url)
    monkeypatch.setenv("SPECREASON_BASE_URL", servers.base_url)
    model = ChatSpecReason()
    assert model.budget == 8192 and model.judge == "arithmetic+likelihood"
    question = "What is 2+2? Reply with just the number."
    msg = model.invoke(question)
    assert msg.content.strip()  # what it says is the tiny test models' business
    stats = msg.response_metadata["specreason"]
    window = asyncio.run(OpenAIEndpoint(servers.base_url).max_model_len())
    conversation = model.get_num_tokens_from_messages([HumanMessage(question)])
    assert stats["budget"] < 8192
    assert stats["budget"] + conversation + model.answer_max_tokens < window


async def test_langsmith_name_and_profile_window_come_from_the_servers(servers):
    model = make(servers)
    base = OpenAIEndpoint(servers.base_url, name="base")
    await model._adiscover()  # what ainvoke/astream await first (a sync call asks it itself)
    assert model._get_ls_params()["ls_model_name"] == await base.model_name()  # before a call
    draft = OpenAIEndpoint(servers.draft_url, name="draft")
    windows = [await base.max_model_len(), await draft.max_model_len()]
    assert model.profile["max_input_tokens"] == min(windows)
    assert model.profile["structured_output"] and model.profile["tool_calling"]


def test_json_mode_with_a_repetition_penalty(servers):
    """json_mode on the real base server; vLLM's repetition_penalty, sent through extra_body,
    keeps the 0.5B model from repeating itself inside the object (the standard suite's
    test_json_mode runs with a frequency penalty instead)."""
    from pydantic import BaseModel, Field

    class Joke(BaseModel):
        """Joke to tell user."""

        setup: str = Field(description="question to set up a joke")
        punchline: str = Field(description="answer to resolve the joke")

    model = make(
        servers,
        budget=48,
        step_max_tokens=32,
        max_tokens=None,
        extra_body={"repetition_penalty": 1.1},
    )
    ask = (
        "Tell me a joke about cats. Return the result as a JSON with 'setup' and "
        "'punchline' keys. Return nothing other than JSON."
    )
    out = model.with_structured_output(Joke, method="json_mode", include_raw=True).invoke(ask)
    assert isinstance(out["parsed"], Joke), out
    assert out["raw"].additional_kwargs["reasoning_content"]  # the trace, apart from the JSON
    parts = list(
        model.with_structured_output(Joke.model_json_schema(), method="json_mode").stream(ask)
    )
    assert parts and set(parts[-1]) == {"setup", "punchline"}
