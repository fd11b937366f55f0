"""ChatSpecReason inside LangChain's and LangGraph's seams (scripted servers, no network).

The model's own work (the SpecReason graph's run and every server call's run) is traced
beneath the model's run wherever the model is called: directly, in a chain, in a node of a
user's graph. An agent streamed with ``subgraphs=True`` streams the reply once: the model's
inner graph is not a subgraph of the agent.
"""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.tracers.context import collect_runs
from langchain_core.tracers.langchain import LangChainTracer
from langgraph.graph import END, START, MessagesState, StateGraph
from langsmith import Client

from langchain_specreason import ChatSpecReason

from .test_chat_model import fake_model

SERVER_CALLS = {"draft_step", "judge_step", "rewrite_step", "base_step", "write_answer"}
REPLY = "S0.\n\nB1.\n\nS2."


class Parents(BaseCallbackHandler):
    """Every run's name and parent, as the callbacks report them."""

    def __init__(self) -> None:
        self.runs: dict[UUID, tuple[str, UUID | None]] = {}

    def _seen(self, name: Any, run_id: UUID, parent_run_id: UUID | None) -> None:
        self.runs[run_id] = (str(name), parent_run_id)

    def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, **kw):
        self._seen(kw.get("name") or (serialized or {}).get("name"), run_id, parent_run_id)

    def on_llm_start(self, serialized, prompts, *, run_id, parent_run_id=None, **kw):
        self._seen(kw.get("name") or (serialized or {}).get("name"), run_id, parent_run_id)

    def on_chat_model_start(self, serialized, messages, *, run_id, parent_run_id=None, **kw):
        self._seen("ChatSpecReason", run_id, parent_run_id)

    def ancestors(self, run_id: UUID) -> list[str]:
        return ancestors(self.runs, run_id)


def assert_beneath_the_model(runs: dict[UUID, tuple[str, UUID | None]], ancestors) -> None:
    """The graph's run and every server call's have the model's run among their ancestors."""
    inner = [(i, name) for i, (name, _) in runs.items() if name in SERVER_CALLS | {"specreason"}]
    assert {name for _, name in inner} >= {"specreason", "draft_step", "judge_step"}
    for run_id, name in inner:
        assert "ChatSpecReason" in ancestors(run_id), (name, ancestors(run_id))
    [graph] = [i for i, (name, _) in runs.items() if name == "specreason"]
    assert ancestors(graph)[0] == "ChatSpecReason"


def chain(model: ChatSpecReason):
    return ChatPromptTemplate.from_messages([("human", "{q}")]) | model | StrOutputParser()


def user_graph(model: ChatSpecReason):
    async def ask(state: MessagesState) -> dict:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def ask_sync(state: MessagesState) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    def build(node):
        return (
            StateGraph(MessagesState)
            .add_node("ask", node)
            .add_edge(START, "ask")
            .add_edge("ask", END)
            .compile()
        )

    return build(ask), build(ask_sync)


@pytest.mark.parametrize(
    "where", ["direct", "chain", "chain sync", "graph node", "graph node sync"]
)
async def test_the_models_work_is_traced_beneath_its_run(where):
    model, handler = fake_model(), Parents()
    config: Any = {"callbacks": [handler]}
    question = {"q": "What is 12*7?"}
    if where == "direct":
        await model.ainvoke("What is 12*7?", config)
    elif where == "chain":
        assert await chain(model).ainvoke(question, config) == REPLY
    elif where == "chain sync":
        assert chain(model).invoke(question, config) == REPLY
    else:
        graph, graph_sync = user_graph(model)
        run = graph if where == "graph node" else graph_sync
        out = await run.ainvoke({"messages": [("user", "What is 12*7?")]}, config)
        assert out["messages"][-1].content == REPLY
    assert_beneath_the_model(handler.runs, handler.ancestors)


async def test_collected_runs_of_a_chain_nest_the_models_work_under_its_run():
    with collect_runs() as collector:  # passed as a callback too, as examples/tracing.py does
        chain_ = chain(fake_model())
        assert await chain_.ainvoke({"q": "What is 12*7?"}, {"callbacks": [collector]}) == REPLY
    runs: dict[UUID, tuple[str, UUID | None]] = {}

    def walk(run, parent=None):
        runs[run.id] = (run.name, parent)
        for child in run.child_runs:
            walk(child, run.id)

    [sequence] = collector.traced_runs
    walk(sequence)
    assert [c.name for c in sequence.child_runs] == [
        "ChatPromptTemplate",
        "ChatSpecReason",
        "StrOutputParser",
    ]
    assert_beneath_the_model(runs, lambda run_id: ancestors(runs, run_id))


class _Sent:
    """What a LangSmith client would send, recorded (no network)."""

    status_code = 200
    text = "{}"
    content = b"{}"

    def __init__(self) -> None:
        self.posted: list[dict[str, Any]] = []
        self.headers: dict[str, str] = {}

    def mount(self, *args: Any, **kwargs: Any) -> None:
        pass

    def request(self, method: str, url: str, **kwargs: Any) -> _Sent:
        if method == "POST" and url.endswith("/runs"):
            self.posted.append(json.loads(kwargs.get("data") or "{}"))
        return self

    def json(self) -> dict[str, Any]:
        return {}

    def raise_for_status(self) -> None:
        pass

    def close(self) -> None:
        pass


async def test_langsmiths_tracer_gets_the_models_work_under_its_run_in_a_chain():
    sent = _Sent()
    client = Client(
        api_key="fake",
        api_url="http://127.0.0.1:9",
        session=sent,  # type: ignore[arg-type]
        auto_batch_tracing=False,
        info={},  # no server to ask
    )
    tracer = LangChainTracer(client=client, project_name="seams")
    await chain(fake_model()).ainvoke({"q": "What is 12*7?"}, {"callbacks": [tracer]})
    tracer.wait_for_futures()
    runs = {UUID(r["id"]): (r["name"], r.get("parent_run_id")) for r in sent.posted}
    runs = {i: (name, UUID(p) if p else None) for i, (name, p) in runs.items()}
    assert_beneath_the_model(runs, lambda run_id: ancestors(runs, run_id))


def ancestors(runs: dict[UUID, tuple[str, UUID | None]], run_id: UUID) -> list[str]:
    names, parent = [], runs[run_id][1]
    while parent is not None:
        name, parent = runs[parent]
        names.append(name)
    return names


@pytest.mark.parametrize("modes", [["messages"], ["messages", "updates", "custom"]])
async def test_an_agent_streamed_with_subgraphs_streams_the_reply_once(modes):
    agent = create_agent(fake_model(), tools=[])
    texts, namespaces = [], set()
    async for namespace, mode, item in agent.astream(
        {"messages": [("user", "What is 12*7?")]}, stream_mode=modes, subgraphs=True
    ):
        namespaces.add(namespace)
        if mode == "messages":
            message, _ = item
            texts.append(message.content)
    assert "".join(texts) == REPLY  # the model node's chunks, and nothing after them
    assert namespaces == {()}  # the model's inner graph is no subgraph of the agent


def test_a_sync_agent_stream_with_subgraphs_has_no_inner_messages():
    agent = create_agent(fake_model(), tools=[])
    seen = list(
        agent.stream(
            {"messages": [("user", "What is 12*7?")]}, stream_mode="messages", subgraphs=True
        )
    )
    assert {namespace for namespace, _ in seen} == {()}
    assert not [m for _, (m, _) in seen if isinstance(m, AIMessage) and m.content == REPLY]
    assert "".join(m.content for _, (m, _) in seen) == REPLY


async def test_a_streamed_chain_still_traces_the_models_work_under_the_chain():
    # stream()/astream() give the model no run manager (langchain-core): its work is traced
    # under the caller's runnable, beside the model's run, as before (not lost)
    handler = Parents()
    streamed = chain(fake_model()).astream({"q": "What is 12*7?"}, {"callbacks": [handler]})
    assert "".join([c async for c in streamed]) == REPLY
    inner = [i for i, (name, _) in handler.runs.items() if name in SERVER_CALLS]
    assert inner and all("RunnableSequence" in handler.ancestors(i) for i in inner)


async def test_a_node_streaming_the_model_in_a_graph_streamed_with_subgraphs_shows_it_once():
    model = fake_model()

    async def ask(state: MessagesState) -> dict:
        reply = None
        async for chunk in model.astream(state["messages"]):
            reply = chunk if reply is None else reply + chunk
        return {"messages": [AIMessage(content=reply.content, id="the-reply")]}

    graph = StateGraph(MessagesState).add_node("ask", ask).add_edge(START, "ask").compile()
    seen = [
        (namespace, message.content)
        async for namespace, (message, _) in graph.astream(
            {"messages": [("user", "What is 12*7?")]}, stream_mode="messages", subgraphs=True
        )
    ]
    assert {namespace for namespace, _ in seen} == {()}
    # the model's chunks, then the node's own message: no message of the model's inner graph
    assert [text for _, text in seen if text == REPLY] == [REPLY]
