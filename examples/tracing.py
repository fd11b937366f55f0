"""What a SpecReason call looks like as a trace (LangSmith, or collected locally).

Turn on LangSmith tracing with two environment variables; nothing in the code changes::

    export LANGSMITH_TRACING=true
    export LANGSMITH_API_KEY=...          # your key; never put it in code or logs
    export LANGSMITH_PROJECT=specreason   # optional, default "default"

Each call is one run (``ChatSpecReason``) holding the graph's run (``specreason``), its node
runs, and one LLM child run per server call (``run_type="llm"``, metadata
``ls_provider="vllm"`` and ``ls_model_name`` = the served model, the call's tokens in its
message's ``usage_metadata``, with ``cache_read``: LangSmith's token and cost columns work per
model; what the call decided is in its ``llm_output``):

* ``draft_step``: the draft model writes step n;
* ``judge_step``: the judge reads it; ``llm_output`` holds ``score`` (with the default judge,
  the base model's log-probability of the step's least likely number or operator; 0-9 with
  ``judge="score"``) and ``decision`` (``accepted`` or ``rewritten``);
* ``rewrite_step``: the base model writes a rejected step itself;
* ``write_answer``: the base model writes the answer.

Each carries the metadata ``specreason_step`` (the step index; not on ``write_answer``) and
``specreason_call`` (``draft``, ``judge``, ``rewrite``, ``answer``), so LangSmith can
filter on them.

This script needs no LangSmith account: it collects the same runs locally with
``langchain_core.tracers.context.collect_runs()`` (its collector also passed as a callback,
so that LangGraph's node runs stay in the tree) and prints the tree. It only says whether
tracing is on, never the key; model keys show as ``SecretStr('**********')`` in traces.

Run::

    pip install -e '.[examples]'     # from the repo root: langchain, rich, the RAG embedder
    export SPECREASON_DRAFT_URL=http://127.0.0.1:8201/v1  # optional: without these two,
    export SPECREASON_BASE_URL=http://127.0.0.1:8202/v1   # the `cpu` pair is started
    python examples/tracing.py
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

from _servers import SHORT, servers
from langchain_core.tracers.context import collect_runs
from langchain_core.tracers.schemas import Run

from langchain_specreason import ChatSpecReason

QUESTION = "A shop sells pens at 3 dollars each. How much do 4 pens cost?"
BRIEF = "Be brief: two short steps, then the result."
SERVER_CALLS = ("draft_step", "judge_step", "rewrite_step", "write_answer")


def walk(run: Run, depth: int = 0) -> Iterator[tuple[int, Run]]:
    """The run and its descendants, in start order, with their depth."""
    yield depth, run
    for child in sorted(run.child_runs, key=lambda r: r.dotted_order or ""):
        yield from walk(child, depth + 1)


def shown(run: Run, depth: int) -> bool:
    """The call, the graph, its nodes and the server calls; not LangGraph's routing runs."""
    node = (run.extra or {}).get("metadata", {}).get("langgraph_node")
    return depth <= 1 or run.name == node or run.name in SERVER_CALLS


def describe(run: Run) -> str:
    """One line: name, plus step, call, score and decision for the server calls."""
    meta = (run.extra or {}).get("metadata", {})
    out = (run.outputs or {}).get("llm_output") or {}  # a server call is an LLM run
    parts = [run.name]
    if "specreason_step" in meta:
        parts.append(f"step={meta['specreason_step']}")
    if run.name in SERVER_CALLS:
        parts.append(f"call={meta.get('specreason_call')}")
    if run.name == "judge_step":
        parts.append(f"score={out.get('score')} decision={out.get('decision')}")
    if run.name in ("draft_step", "rewrite_step", "write_answer"):
        parts.append(f"tokens={out.get('completion_tokens')}")
    return "  ".join(parts)


def main() -> int:
    if os.environ.get("LANGSMITH_TRACING", "").lower() == "true":
        key = "set" if os.environ.get("LANGSMITH_API_KEY") else "NOT set"
        project = os.environ.get("LANGSMITH_PROJECT", "default")
        print(f"LangSmith tracing: on (project {project!r}, LANGSMITH_API_KEY {key})")
    else:
        print(
            "LangSmith tracing: off (set LANGSMITH_TRACING=true and LANGSMITH_API_KEY to "
            "send these runs to LangSmith too); collecting them locally"
        )

    with servers() as srv:
        llm = ChatSpecReason(
            draft_url=srv.draft_url, base_url=srv.base_url, family=srv.family, **SHORT
        )
        with collect_runs() as collector:
            # Also passed as a callback: collect_runs() alone attaches its collector to the
            # top-level runs only, and LangGraph's node runs would go missing from the tree.
            reply = llm.invoke(
                [("system", BRIEF), ("user", QUESTION)], config={"callbacks": [collector]}
            )

    roots = collector.traced_runs
    print(f"\nquestion: {QUESTION}\nanswer: {' '.join(str(reply.content).split())}\n")
    print(f"trace ({len(roots)} root run, one per call):")
    judged = 0
    for root in roots:
        for depth, run in walk(root):
            if shown(run, depth):
                print("  " * depth + describe(run))
                judged += run.name == "judge_step"
    return 0 if judged and str(reply.content).strip() else 1


if __name__ == "__main__":
    sys.exit(main())
