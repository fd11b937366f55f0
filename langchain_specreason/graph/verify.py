"""The ``verify`` node: the next decided position of the trace, from the mode's verifier.

The same for every mode (:mod:`~.verifiers`): while positions a round already decided are
queued (``verified``), it hands the next one to ``accept`` or ``rewrite``, one checkpoint each,
so a run interrupted in the middle of a round resumes without asking a server again. When the
queue is empty it runs a round, unless the draft circuit breaker is open. A draft outage is
handled here, once for every mode: the positions decided before it are kept, the outage trips
the breaker, and the base model writes the remaining steps (``draft_down``).
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from ..state import SpecReasonState
from .nodes import draft_failed, fall_back
from .parts import Parts


async def verify(state: SpecReasonState, config: RunnableConfig, *, parts: Parts) -> dict[str, Any]:
    """Hand the next decided position to ``accept``/``rewrite``; run a round when none is left."""
    queue = list(state.get("verified") or [])
    if queue:
        return {"pending": queue[0], "verified": queue[1:]}
    index = len(state.get("steps") or [])
    if (skipped := parts.breaker.blocked()) is not None:
        return {**fall_back(parts, index, skipped), "verified": []}
    decided = await parts.verifier.round(parts, state, config)
    update: dict[str, Any] = {"lookahead": decided.lookahead}
    if decided.input_tokens is not None:
        update["input_tokens"] = decided.input_tokens
    if decided.failed is not None:
        drafted = sum(step.get("drafted", True) for step in decided.steps)
        down = draft_failed(parts, index + drafted, decided.failed)  # raises a refusal
        if not decided.steps:
            return {**update, **down, "verified": []}
        update["draft_down"] = down["draft_down"]
    else:
        parts.breaker.reset()
    return {**update, "pending": decided.steps[0], "verified": decided.steps[1:]}


async def after_verify(state: SpecReasonState) -> str:
    """An accepted draft step joins the trace; otherwise the base's step does (``rewrite``)."""
    pending = state.get("pending")
    if pending is None:  # the draft is down: the base model writes the step
        return "rewrite"
    return "accept" if pending["accept"] else "rewrite"
