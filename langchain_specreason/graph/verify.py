"""The ``verify`` node of the ``agree`` mode: a round of draft steps checked by agreement.

With ``SpecReasonConfig(verify="agree")`` no judge reads a draft step. A round (Lookahead
Reasoning, arXiv 2506.19830):

* the draft model writes up to ``steps_ahead`` steps, one after the other, on its own server;
* the base model writes its own step at each of those positions, each request sent as soon as
  its prefix (the trace and the draft steps before the position) is known, so the base server
  batches them while the draft keeps writing;
* the rule (:mod:`~..agreement`) compares the draft's and the base's step position by
  position: the agreeing draft steps are kept, and at the first disagreement the base's step
  (already written) is kept instead. Work built on the rejected step, the draft's later steps
  and the base's later positions, is cancelled then, not at the end of the round.

The node returns the round's positions as a queue (``verified``) and hands them to ``accept``
and ``rewrite`` one at a time, so every step of a round joins the trace in its own checkpoint
and a run interrupted in the middle of a round resumes with the rest of the queue, without
asking a server again.

Timing, in each position's ``verdict``: the round's wall time, the draft's and the base's busy
seconds, and how many base requests ran at once. The round's wall time is counted once, on its
first step: ``draft_s`` up to the draft step the round waited for last, ``judge_s`` for the
wait on the base model after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer

from ..endpoint import Completion
from ..errors import EndpointError
from ..events import Drafted, Scored
from ..judges import Rewrite
from ..state import PendingStep, SpecReasonState
from .nodes import Parts, draft_failed, fall_back, write_draft
from .steps import apply_step, next_node, step_record
from .tracing import completion_outputs, served_model, traced_call


@dataclasses.dataclass
class _Round:
    """What one round has written so far (the draft steps, the base's requests)."""

    drafts: list[asyncio.Future[PendingStep | None]]
    base: list[asyncio.Task[Completion]]
    started: float
    draft_ready: list[float] = dataclasses.field(default_factory=list)


def _with(parts: Parts, state: SpecReasonState, pending: PendingStep) -> SpecReasonState | None:
    """The state once ``pending`` joins the trace; None when the trace would stop there."""
    after = cast(
        SpecReasonState,
        {**state, **apply_step(state, step_record(state, pending, "accepted"), parts.config)},
    )
    return after if next_node(after, parts.config) == "verify" else None


async def _base_step(
    parts: Parts, state: SpecReasonState, config: RunnableConfig, index: int
) -> Completion:
    """The base model's own step at position ``index`` after ``state``'s trace."""
    request = parts.step_request(state)
    return await traced_call(
        config,
        "base_step",
        {"specreason_step": index, "specreason_call": "verify"},
        {"messages": request.messages},
        lambda: parts.base.complete(request),
        completion_outputs,
        model=served_model(parts.base),
    )


async def _draft_ahead(
    parts: Parts, state: SpecReasonState, config: RunnableConfig, work: _Round
) -> None:
    """Write the round's draft steps; after each, send the base's request for the next one."""
    index = len(state.get("steps") or [])
    writer = get_stream_writer()
    try:
        for position in range(parts.config.steps_ahead):
            pending, _ = await write_draft(parts, state, config, index + position, position > 0)
            work.draft_ready.append(time.perf_counter())
            writer(
                Drafted(
                    type="drafted",
                    step=index + position,
                    text=pending["text"],
                    tokens=pending["tokens"],
                    seconds=pending["draft_s"],
                )
            )
            work.drafts[position].set_result(pending)
            following = _with(parts, state, pending) if pending["text"].strip() else None
            if following is None or position + 1 == parts.config.steps_ahead:
                break
            state = following
            work.base.append(
                asyncio.ensure_future(_base_step(parts, state, config, index + position + 1))
            )
    except Exception as exc:
        for future in work.drafts:
            if not future.done():
                future.set_exception(exc)
        return
    for future in work.drafts:  # the trace stops before these positions
        if not future.done():
            future.set_result(None)


async def _round(
    parts: Parts, state: SpecReasonState, config: RunnableConfig
) -> tuple[list[PendingStep], EndpointError | None]:
    """One round: the verified positions, in order, and the draft's error if it failed."""
    rule = parts.rule
    assert rule is not None
    loop = asyncio.get_running_loop()
    index = len(state.get("steps") or [])
    work = _Round(
        drafts=[loop.create_future() for _ in range(parts.config.steps_ahead)],
        base=[asyncio.ensure_future(_base_step(parts, state, config, index))],
        started=time.perf_counter(),
    )
    drafting = asyncio.ensure_future(_draft_ahead(parts, state, config, work))
    queue: list[PendingStep] = []
    failed: EndpointError | None = None
    writer = get_stream_writer()
    try:
        for position, future in enumerate(work.drafts):
            try:
                pending = await future
            except EndpointError as exc:
                failed = exc
                break
            if pending is None:
                break
            base = await work.base[position]
            agreement = rule.agree(pending["text"], base.text) if pending["text"].strip() else None
            agree = agreement is not None and agreement.agree
            writer(
                Scored(
                    type="scored",
                    step=index + position,
                    score=1.0 if agree else 0.0,
                    accepted=agree,
                    seconds=base.seconds,
                )
            )
            verdict = {
                "rule": parts.config.agree_rule,
                "agree": agree,
                "position": position,
                "base_text": base.text,
                "base_tokens": base.completion_tokens,
                "base_s": round(base.seconds, 4),
                **(agreement.detail if agreement else {}),
            }
            step: PendingStep = {**pending, "score": 1.0 if agree else 0.0, "accept": agree}
            step["verdict"] = verdict
            if not agree:
                step["rewrite"] = dataclasses.asdict(
                    Rewrite(
                        text=base.text,
                        tokens=base.completion_tokens,
                        seconds=base.seconds,
                        finish_reason=base.finish_reason,
                        stop_reason=base.stop_reason,
                    )
                )
            queue.append(step)
            if not agree:
                break
    finally:
        drafting.cancel()
        for task in work.base:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(drafting, *work.base, return_exceptions=True)
    _time_round(queue, work)
    return queue, failed


def _time_round(queue: list[PendingStep], work: _Round) -> None:
    """The round's seconds on its first step; each position's own in its verdict."""
    if not queue:
        return
    ended = time.perf_counter()
    waited_draft = work.draft_ready[len(queue) - 1] - work.started
    base_busy = sum(
        task.result().seconds
        for task in work.base
        if task.done() and not task.cancelled() and task.exception() is None
    )
    summary = {
        "round_s": round(ended - work.started, 4),
        "round_steps": len(queue),
        "round_base_requests": len(work.base),
        "round_base_busy_s": round(base_busy, 4),
        "round_draft_busy_s": round(sum(step["draft_s"] for step in queue), 4),
        "all_agree": all(step["accept"] for step in queue),
    }
    for position, step in enumerate(queue):
        step["verdict"] = {**step.get("verdict", {}), **summary}
        if position == 0:
            step["draft_s"] = round(max(0.0, waited_draft), 4)
            step["judge_s"] = round(max(0.0, ended - work.started - waited_draft), 4)
        else:
            step["draft_hidden_s"] = step["draft_s"]
            step["draft_s"] = 0.0


async def verify(state: SpecReasonState, config: RunnableConfig, *, parts: Parts) -> dict[str, Any]:
    """Hand the next verified position to ``accept``/``rewrite``; run a round when none is left."""
    queue = list(state.get("verified") or [])
    index = len(state.get("steps") or [])
    update: dict[str, Any] = {}
    if not queue:
        if (skipped := parts.breaker.blocked()) is not None:
            return {**fall_back(parts, index, skipped), "verified": []}
        queue, failed = await _round(parts, state, config)
        if failed is not None:
            down = draft_failed(parts, index + len(queue), failed)
            if not queue:
                return {**down, "verified": []}
            update["draft_down"] = down["draft_down"]
        else:
            parts.breaker.reset()
    return {**update, "pending": queue[0], "verified": queue[1:]}


async def after_verify(state: SpecReasonState) -> str:
    """An agreeing draft step is accepted; otherwise the base's step is kept (``rewrite``)."""
    pending = state.get("pending")
    return "accept" if pending and pending["accept"] else "rewrite"
