"""ChatSpecReason called inside a node of a checkpointed LangGraph graph (an agent, a RAG
pipeline): the call is not a subgraph of the parent; with its own checkpointer it resumes on
the parent's thread."""

from __future__ import annotations

from typing import TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from langchain_specreason.errors import EndpointError

from .fakes import partial_of
from .test_chat_model import fake_model

QUESTION = "What is 12*7?"
THREAD = {"configurable": {"thread_id": "t1"}}


class Asked(TypedDict, total=False):
    q: str
    a: str


def parent_graph(llm, saver: InMemorySaver):
    async def ask(state: Asked) -> Asked:
        reply = await llm.ainvoke(state["q"])
        return {"a": str(reply.content)}

    builder = StateGraph(Asked)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=saver)


def threads(saver: InMemorySaver) -> dict[tuple[str, str], int]:
    """Checkpoints by (thread_id, checkpoint_ns)."""
    out: dict[tuple[str, str], int] = {}
    for saved in saver.list(None):
        conf = saved.config["configurable"]
        key = (conf["thread_id"], conf.get("checkpoint_ns", ""))
        out[key] = out.get(key, 0) + 1
    return out


async def test_the_call_leaves_no_checkpoints_in_the_parents_saver():
    saver = InMemorySaver()
    out = await parent_graph(fake_model(), saver).ainvoke({"q": QUESTION}, THREAD)
    assert out["a"] == "S0.\n\nB1.\n\nS2."
    # only the parent's own checkpoints: LangGraph lends a parent's checkpointer to a graph
    # run inside a node unless that graph refuses it; a chat model call is not a subgraph
    assert set(threads(saver)) == {("t1", "")}


async def test_with_its_own_checkpointer_the_call_resumes_on_the_parents_thread():
    own, saver = InMemorySaver(), InMemorySaver()
    llm = fake_model(checkpointer=own)
    base = llm.base_endpoint
    answer = base.handler
    failed = {"once": False}

    def flaky(request):  # the base server fails on the first rewrite (step 1), once
        if not failed["once"] and "S0." in partial_of(request) and not request.top_logprobs:
            failed["once"] = True
            raise EndpointError("base", "http://b/v1", "503 Service Unavailable")
        return answer(request)

    base.handler = flaky
    graph = parent_graph(llm, saver)
    with pytest.raises(EndpointError, match="503"):
        await graph.ainvoke({"q": QUESTION}, THREAD)
    drafted_before = len(llm.draft_endpoint.requests)
    assert set(threads(own)) == {("t1", "")}  # the call's steps, under the parent's thread

    out = await graph.ainvoke(None, THREAD)  # the parent resumes its failed node
    assert out["a"] == "S0.\n\nB1.\n\nS2."
    again = llm.draft_endpoint.requests[drafted_before:]
    assert again and all(partial_of(r).startswith("S0.\n\nB1.") for r in again)  # none redone
    assert set(threads(saver)) == {("t1", "")}
