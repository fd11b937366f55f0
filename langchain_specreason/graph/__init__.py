"""The SpecReason algorithm as a LangGraph state graph. This is the only implementation.

The nodes are module-level functions (:mod:`.nodes`, :mod:`.answer`) over pure helpers
(:mod:`.steps`); :func:`create_specreason_graph` wires them.

::

    START -> start -> verify -> accept | rewrite -> verify | rewrite | answer -> END

* ``start`` checks the conversation, fits the budget to the servers' windows and resets the
  per-run fields;
* ``verify`` decides the next drafted positions with the mode's verifier (:mod:`.verifiers`):
  ``judge`` (SpecReason) has the draft model write the next step and a judge read it (with
  ``lookahead`` the draft writes the step after it meanwhile); ``agree`` (Lookahead Reasoning)
  has the draft write ``steps_ahead`` steps while the base model writes its own step at each
  of those positions, pipelined, and keeps the agreeing prefix. Decided positions queue in
  ``verified`` and join the trace one node run each. A draft outage (or an open circuit
  breaker) is handled here for every mode;
* ``accept``: the draft step joins the trace; ``rewrite``: the base model writes the step (a
  rejected or blank draft, one of the first ``first_n_base_steps``, the draft down), unless the
  verifier already wrote it;
* after each step the stop rules run (:func:`apply_step`): end of message, end of thinking,
  a step repeating a recent one, or the budget spent; then ``answer`` writes the final answer
  (streamed by the base model, or by the draft with ``answer_by="draft"``).

Every node writes typed events (:mod:`~.events`) to LangGraph's ``custom`` stream so a UI can
show the trace live; ``fallback`` says the draft server failed and the base model writes the
remaining steps. Node updates are checkpointed
after each step: with a checkpointer, an interrupted thread resumes from its last completed
node with ``graph.ainvoke(None, config)``.
"""

from __future__ import annotations

from collections.abc import Hashable
from functools import partial
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from ..config import SpecReasonConfig
from ..endpoint import Endpoint
from ..formats import PromptFormat, get_format
from ..judges import Judge
from ..state import SpecReasonInput, SpecReasonOutput, SpecReasonState
from . import nodes
from .answer import answer
from .breaker import Breaker
from .parts import Parts, Round, Verifier
from .steps import apply_step, next_node, step_finish, step_record
from .verifiers import make_verifier
from .verify import after_verify, verify

__all__ = [
    "NODES",
    "Breaker",
    "Parts",
    "Round",
    "SpecReasonGraph",
    "Verifier",
    "apply_step",
    "create_specreason_graph",
    "next_node",
    "step_finish",
    "step_record",
]

NODES = ("start", "verify", "accept", "rewrite", "answer")
"""The graph's node names. Stable: traces, tests and UIs refer to them."""

SpecReasonGraph = CompiledStateGraph[SpecReasonState, None, SpecReasonInput, SpecReasonOutput]
"""The compiled graph :func:`create_specreason_graph` returns."""


def create_specreason_graph(
    draft: Endpoint,
    base: Endpoint,
    *,
    judge: Judge | None = None,
    config: SpecReasonConfig | None = None,
    family: str | PromptFormat = "instruct",
    checkpointer: Checkpointer = None,
    name: str | None = "specreason",
    context_schema: type[Any] | None = None,
    breaker: Breaker | None = None,
    verifier: Verifier | None = None,
) -> SpecReasonGraph:
    """Build the SpecReason graph over a draft and a base endpoint.

    Args:
        draft: the small model's endpoint (writes draft steps).
        base: the big model's endpoint (judges, rewrites, answers).
        judge: decides whether a draft step is accepted (``verify="judge"`` only; refused with
            ``verify="agree"``); default: the judge ``config.judge`` names, with its settings
            (:func:`~.judges.make_judge`).
        config: the knobs (:class:`SpecReasonConfig`).
        family: prompt family of the pair (``"instruct"``, ``"think"``, or a
            :class:`~.formats.PromptFormat`).
        checkpointer: any LangGraph checkpointer, to resume interrupted runs.
        name: the graph's name in traces.
        context_schema: the run context's schema, shown by LangGraph Studio (the nodes do
            not read it; ``studio.py`` builds a graph per setting).
        breaker: the draft server's circuit breaker; pass one :class:`~.breaker.Breaker` to
            several graphs over the same draft server (a chat model's settings) so an outage
            one of them saw is known to all; default: one of this graph's own.
        verifier: decides the drafted positions (:class:`~.parts.Verifier`); default: the one
            ``config.verify`` names (:func:`~.verifiers.make_verifier`).

    Returns:
        A compiled LangGraph graph. Input :class:`~.state.SpecReasonInput` (``messages``,
        optional ``answer_options``); output :class:`~.state.SpecReasonOutput` (``steps``,
        ``answer``, ``stop``, the conversation with the answer appended, counts).

    Example::

        graph = create_specreason_graph(OpenAIEndpoint(draft_url, name="draft"),
                                        OpenAIEndpoint(base_url, name="base"))
        out = await graph.ainvoke({"messages": [("user", "What is 12*7?")]})
        print(out["answer"])
    """
    cfg = config or SpecReasonConfig()
    fmt = get_format(family)
    parts = Parts(
        draft=draft,
        base=base,
        verifier=verifier or make_verifier(cfg, draft, base, fmt, judge),
        config=cfg,
        fmt=fmt,
        breaker=breaker or Breaker(cfg.draft_cooldown),
    )
    builder = StateGraph(
        SpecReasonState,
        context_schema=context_schema,
        input_schema=SpecReasonInput,
        output_schema=SpecReasonOutput,
    )
    builder.add_node("start", partial(nodes.start, parts=parts))
    builder.add_node("verify", partial(verify, parts=parts))
    builder.add_node("accept", partial(nodes.accept, parts=parts))
    builder.add_node("rewrite", partial(nodes.rewrite, parts=parts))
    builder.add_node("answer", partial(answer, parts=parts))
    builder.add_edge(START, "start")
    route: dict[Hashable, str] = {"verify": "verify", "rewrite": "rewrite", "answer": "answer"}
    for node in ("start", "accept", "rewrite"):
        builder.add_conditional_edges(node, partial(nodes.after_step, parts=parts), route)
    builder.add_conditional_edges(
        "verify", after_verify, {"accept": "accept", "rewrite": "rewrite"}
    )
    builder.add_edge("answer", END)
    graph = builder.compile(checkpointer=checkpointer, name=name or "specreason")
    # Every step of the trace costs at most three node runs and holds at least one token.
    return graph.with_config(recursion_limit=3 * cfg.budget + 10)
