"""ChatSpecReason as the model of a LangChain agent with a real tool, end to end."""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import wrap_model_call
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from tests.helpers import pair_model

pytestmark = pytest.mark.integration

CALLS: list[tuple[int, int]] = []


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers and return the product."""
    CALLS.append((a, b))
    return a * b


@wrap_model_call
async def tool_first(request, handler):
    """Small models rarely choose a tool on their own: require one until a tool has answered."""
    if not any(isinstance(m, ToolMessage) for m in request.messages):
        request = request.override(tool_choice="required")
    return await handler(request)


@pytest.fixture
def model(servers):
    """ChatSpecReason on the session's servers, greedy and short; the tool's calls cleared."""
    CALLS.clear()
    return pair_model(servers, temperature=0, seed=0, budget=48, step_max_tokens=32, max_tokens=64)


async def test_agent_calls_the_tool_and_answers_with_its_result(model):
    agent = create_agent(
        model,
        tools=[multiply],
        middleware=[tool_first],
        system_prompt="Use the multiply tool for every multiplication.",
    )
    out = await agent.ainvoke(
        {"messages": [("user", "What is 123 * 456? Use the tool.")]}, {"recursion_limit": 8}
    )
    messages = out["messages"]
    tool_results = [m for m in messages if isinstance(m, ToolMessage)]
    assert CALLS == [(123, 456)], messages
    assert tool_results[0].content == "56088"
    first = next(m for m in messages if isinstance(m, AIMessage))
    assert first.tool_calls[0]["name"] == "multiply"
    assert first.response_metadata["finish_reason"] == "tool_calls"
    final = messages[-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert final.content.strip()
    # the turn after the tool result reasoned with SpecReason again
    assert final.response_metadata["specreason"]["judge_calls"] >= 1


async def test_with_the_default_tool_choice_a_call_written_as_json_is_recovered(model):
    """Qwen2.5-Coder-0.5B, the cpu-test base, writes its call as a fenced JSON block that
    vLLM's hermes parser does not read; ChatSpecReason reads it back, so the agent loop works
    without forcing a tool."""
    agent = create_agent(
        model, tools=[multiply], system_prompt="Use the multiply tool for every multiplication."
    )
    out = await agent.ainvoke(
        {"messages": [("user", "What is 123 * 456? Use the tool.")]}, {"recursion_limit": 8}
    )
    messages = out["messages"]
    assert CALLS and CALLS[0] == (123, 456), messages
    first = next(m for m in messages if isinstance(m, AIMessage))
    assert first.tool_calls[0]["name"] == "multiply"
    assert first.response_metadata["finish_reason"] == "tool_calls"
    assert '"name"' not in first.text  # the call is a call, not text
    assert isinstance(messages[-1], AIMessage) and not messages[-1].tool_calls
