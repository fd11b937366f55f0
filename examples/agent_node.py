"""ChatSpecReason in agents: a tool-calling agent, and the SpecReason graph as a subgraph node.

Part 1: a LangChain agent (`create_agent`) whose model is ChatSpecReason calls a real tool, a
calculator, and answers with its result. Small models rarely choose a tool on their own, so a
small middleware requires a tool call until one has answered (drop it with a larger base model).

Part 2: a parent LangGraph graph runs `retrieve -> specreason -> report`, where `specreason`
is the compiled SpecReason graph used as a subgraph node, streamed with `subgraphs=True` so
the parent sees every step the subgraph keeps or rewrites.

Run::

    pip install -e '.[examples]'     # from the repo root: langchain, rich, the RAG embedder
    export SPECREASON_DRAFT_URL=http://127.0.0.1:8201/v1   # optional: without these two,
    export SPECREASON_BASE_URL=http://127.0.0.1:8202/v1    # the `cpu` pair is started
    python examples/agent_node.py
"""

from __future__ import annotations

import ast
import asyncio
import operator
import sys

from _servers import SHORT, servers
from langchain.agents import create_agent
from langchain.agents.middleware import wrap_model_call
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph

from langchain_specreason import ChatSpecReason

_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * / and parentheses, e.g. '123 * 456'."""

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        raise ValueError(f"unsupported expression: {expression!r}")

    value = ev(ast.parse(expression, mode="eval").body)
    return str(int(value) if float(value).is_integer() else value)


@wrap_model_call
async def tool_first(request, handler):
    """Require a tool call until a tool has answered (small models rarely pick one)."""
    if not any(isinstance(m, ToolMessage) for m in request.messages):
        request = request.override(tool_choice="required")
    return await handler(request)


async def agent_part(llm: ChatSpecReason) -> bool:
    agent = create_agent(
        llm,
        tools=[calculator],
        middleware=[tool_first],
        system_prompt="Use the calculator for arithmetic. Be brief.",
    )
    out = await agent.ainvoke(
        {"messages": [("user", "What is 123 * 456?")]}, {"recursion_limit": 8}
    )
    calls = [tc for m in out["messages"] if isinstance(m, AIMessage) for tc in m.tool_calls]
    results = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
    print("agent")
    for call, result in zip(calls, results, strict=False):
        print(f"  tool call: {call['name']}({call['args']}) -> {result}")
    print(f"  answer: {' '.join(str(out['messages'][-1].content).split())}\n")
    return bool(calls) and "56088" in results


async def subgraph_part(llm: ChatSpecReason) -> bool:
    def retrieve(state: MessagesState) -> dict:
        note = "Note: a dozen is 12."
        return {"messages": [HumanMessage(f"{note} How many eggs are in 3 dozen?")]}

    def report(state: MessagesState) -> dict:
        return {"messages": [AIMessage(f"[report] {state['messages'][-1].content.strip()}")]}

    parent = (
        StateGraph(MessagesState)
        .add_node("retrieve", retrieve)
        .add_node("specreason", llm.graph)  # the compiled SpecReason graph as a node
        .add_node("report", report)
        .add_edge(START, "retrieve")
        .add_edge("retrieve", "specreason")
        .add_edge("specreason", "report")
        .add_edge("report", END)
        .compile()
    )
    print("parent graph with the SpecReason subgraph (stream_mode='custom', subgraphs=True)")
    steps = 0
    async for namespace, event in parent.astream(
        {"messages": []}, stream_mode="custom", subgraphs=True
    ):
        if event.get("type") == "step":
            steps += 1
            print(
                f"  {namespace[0].split(':')[0]} step {event['step']} {event['decision']}: "
                f"{' '.join(event['text'].split())[:80]}"
            )
    final = await parent.ainvoke({"messages": []})
    print(f"  parent's last message: {' '.join(final['messages'][-1].content.split())[:160]}")
    return steps > 0 and final["messages"][-1].content.startswith("[report]")


async def amain() -> int:
    with servers() as srv:
        llm = ChatSpecReason(
            draft_url=srv.draft_url, base_url=srv.base_url, family=srv.family, **SHORT
        )
        ok_agent = await agent_part(llm)
        ok_graph = await subgraph_part(llm)
    return 0 if ok_agent and ok_graph else 1


def main() -> int:
    return asyncio.run(amain())


if __name__ == "__main__":
    sys.exit(main())
