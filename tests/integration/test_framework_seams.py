"""ChatSpecReason at LangChain's seams, on the session's real servers (kept short)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from pydantic import BaseModel

from langchain_specreason import ConfigError
from tests.helpers import pair_model

pytestmark = pytest.mark.integration


async def test_a_reasoning_models_max_tokens_leaves_room_to_reason(servers):
    # 16k is a usual max_tokens for a reasoning model: it must not starve the budget
    model = pair_model(
        servers,
        temperature=0,
        seed=0,
        budget=48,
        step_max_tokens=24,
        answer_max_tokens=16,
        max_tokens=16000,
    )
    msg = await model.ainvoke("What is 17 + 25? Think step by step.")
    assert msg.response_metadata["specreason"]["steps_drafted"] > 0


async def test_an_agent_streamed_with_subgraphs_streams_the_reply_once(servers):
    model = pair_model(servers, temperature=0, seed=0, budget=16, step_max_tokens=16, max_tokens=40)
    agent = create_agent(model, tools=[])
    texts, namespaces, final = [], set(), None
    async for namespace, mode, item in agent.astream(
        {"messages": [("user", "Say hello in three words.")]},
        stream_mode=["messages", "values"],
        subgraphs=True,
    ):
        namespaces.add(namespace)
        if mode == "messages":
            texts.append(item[0].content)
        else:
            final = item["messages"][-1]
    assert namespaces == {()}  # nothing from the model's own graph
    assert final is not None and final.content
    assert "".join(t for t in texts if isinstance(t, str)) == final.content


class Sum(BaseModel):
    """The sum of two numbers."""

    total: int


async def test_structured_output_returns_a_parsed_object(servers):
    model = pair_model(
        servers, temperature=0, seed=0, budget=16, step_max_tokens=16, answer_max_tokens=32
    )
    out = await model.with_structured_output(Sum).ainvoke(
        "What is 2 + 3? Answer as JSON with the key total."
    )
    assert isinstance(out, Sum)


@pytest.mark.parametrize("where", ["chain", "graph node"])
async def test_the_models_work_is_traced_beneath_its_run_in_a_chain_and_a_node(servers, where):
    """``prompt | llm | parser`` and a node of a user's graph, on the real servers: the
    SpecReason graph's run and every server call's run sit beneath the ChatSpecReason run."""
    from tests.unit.test_framework_seams import Parents, assert_beneath_the_model, chain, user_graph

    model = pair_model(
        servers, temperature=0, seed=0, budget=24, step_max_tokens=12, answer_max_tokens=8
    )
    handler = Parents()
    config: Any = {"callbacks": [handler]}
    if where == "chain":
        assert await chain(model).ainvoke({"q": "What is 12*7?"}, config)
    else:
        graph, _ = user_graph(model)
        out = await graph.ainvoke({"messages": [("user", "What is 12*7?")]}, config)
        assert out["messages"][-1].content
    assert_beneath_the_model(handler.runs, handler.ancestors)


async def test_options_the_model_cannot_honour_are_refused_per_call(servers):
    """``n=2`` and ``logprobs`` per call are refused with a typed error, as the constructor
    refuses them, before any server is asked for a step."""
    model = pair_model(servers, budget=8)
    with pytest.raises(ConfigError, match="may not set logprobs"):
        await model.bind(logprobs=True).ainvoke("What is 12*7?")
    with pytest.raises(ConfigError, match="may not set n"):
        await model.agenerate([[HumanMessage("What is 12*7?")]], n=2)
