"""The ``agree`` verifier (Lookahead Reasoning, arXiv 2506.19830): agreement with the base.

A round of draft steps is checked by agreement with the base model's own steps. With
``SpecReasonConfig(verify="agree")`` no judge reads a draft step. A round:

* the draft model writes up to ``steps_ahead`` steps, one after the other, on its own server;
* the base model writes its own step at each of those positions, each request sent as soon as
  its prefix (the trace and the draft steps before the position) is known, so the base server
  batches them while the draft keeps writing (pipelined behind the draft, not one batch at
  the end);
* the rule (:mod:`~...agreement`) compares the draft's and the base's step position by
  position, both in the form they would take in the trace (delimiter put back): the agreeing
  draft steps are kept, and at the first disagreement the base's step (already written) is
  kept instead. Work built on the rejected step, the draft's later steps and the base's later
  positions, is cancelled then, not at the end of the round.
* If the draft server fails in the middle of a round, the positions agreed before it are
  kept, and the base's step at the failed position (already requested) is kept as a ``base``
  step; the ``verify`` node then lets the base model write the rest.

Timing, in each position's ``verdict``: the round's wall time, the draft's and the base's busy
seconds, and how many base requests the round started. The round's wall time is counted once,
on its first step: ``draft_s`` up to the draft step the round waited for last, ``judge_s`` for
the wait on the base model after it. An agreed position's ``base_tokens`` are the tokens of the
base's own step there (the base model wrote them, though the draft's step was kept).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer

from ...agreement import AgreementRule
from ...endpoint import Completion
from ...errors import EndpointError
from ...events import Drafted, Scored
from ...judges import Rewrite
from ...state import PendingStep, SpecReasonState
from ..drafting import write_draft
from ..parts import Parts, Round
from ..steps import ahead_of, step_finish
from ..tracing import completion_outputs, served_model, traced_call


@dataclasses.dataclass(frozen=True)
class AgreeVerifier:
    """The base model writes each drafted position too; ``rule`` compares the two steps."""

    rule: AgreementRule

    async def round(self, parts: Parts, state: SpecReasonState, config: RunnableConfig) -> Round:
        """One round: the agreeing prefix, then the base's step at the first disagreement."""
        loop = asyncio.get_running_loop()
        index = len(state.get("steps") or [])
        work = _Work(
            drafts=[loop.create_future() for _ in range(parts.config.steps_ahead)],
            base=[asyncio.ensure_future(_base_step(parts, state, config, index))],
            started=time.perf_counter(),
        )
        drafting = asyncio.ensure_future(_draft_ahead(parts, state, config, work))
        decided = Round()
        try:
            for position, future in enumerate(work.drafts):
                try:
                    pending = await future
                except EndpointError as exc:
                    decided.failed = exc
                    # the base's step here was asked for before the draft failed: keep it
                    if position < len(work.base):
                        decided.steps.append(_undrafted(position, await work.base[position]))
                    break
                if pending is None:
                    break
                step = self._compare(parts, index, position, pending, await work.base[position])
                decided.steps.append(step)
                if not step["accept"]:
                    break
        finally:
            await _cancel(drafting, work)
        _time_round(decided.steps, work)
        return decided

    def _compare(
        self, parts: Parts, index: int, position: int, pending: PendingStep, base: Completion
    ) -> PendingStep:
        """The draft's step at the round's ``position`` against the base's.

        Each as it would join the trace: the base's step ``step_finish``-ed, as the labels that
        chose the rules read it.
        """
        base_text, _ = step_finish(base, parts.config.delimiter, parts.fmt.thinking_end)
        agreement = self.rule.agree(pending["text"], base_text) if pending["text"].strip() else None
        agree = agreement is not None and agreement.agree
        get_stream_writer()(
            Scored(
                type="scored",
                step=index + position,
                score=1.0 if agree else 0.0,
                accepted=agree,
                seconds=base.seconds,
            )
        )
        step: PendingStep = {
            **pending,
            "score": 1.0 if agree else 0.0,
            "accept": agree,
            "base_tokens": base.completion_tokens,
            "verdict": {
                "rule": parts.config.agree_rule,
                "agree": agree,
                "position": position,
                "base_text": base.text,
                "base_tokens": base.completion_tokens,
                "base_s": round(base.seconds, 4),
                **(agreement.detail if agreement else {}),
            },
        }
        if not agree:
            step["rewrite"] = _rewrite(base)
        return step


def _rewrite(base: Completion) -> dict[str, object]:
    return dataclasses.asdict(
        Rewrite(
            text=base.text,
            tokens=base.completion_tokens,
            seconds=base.seconds,
            finish_reason=base.finish_reason,
            stop_reason=base.stop_reason,
        )
    )


def _undrafted(position: int, base: Completion) -> PendingStep:
    """A position the draft failed to write, with the base's step already written there."""
    return {
        "text": "",
        "finish": "end",
        "tokens": 0,
        "draft_s": 0.0,
        "score": None,
        "accept": False,
        "judge_s": 0.0,
        "judge_prompt_tokens": 0,
        "judge_cached_tokens": None,
        "drafted": False,
        "rewrite": _rewrite(base),
        "verdict": {"position": position, "draft_failed": True},
    }


@dataclasses.dataclass
class _Work:
    """What one round has started so far (the draft steps, the base's requests)."""

    drafts: list[asyncio.Future[PendingStep | None]]
    base: list[asyncio.Task[Completion]]
    started: float
    draft_ready: list[float] = dataclasses.field(default_factory=list)


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
    parts: Parts, state: SpecReasonState, config: RunnableConfig, work: _Work
) -> None:
    """Write the round's draft steps; after each, send the base's request for the next one."""
    index = len(state.get("steps") or [])
    writer = get_stream_writer()
    position = 0
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
            following = ahead_of(state, pending, parts.config) if pending["text"].strip() else None
            if following is None or position + 1 == parts.config.steps_ahead:
                break
            state = following
            work.base.append(
                asyncio.ensure_future(_base_step(parts, state, config, index + position + 1))
            )
    except Exception as exc:  # the round reads it at this position; later ones never come
        work.drafts[position].set_exception(exc)
    for future in work.drafts:  # the trace stops before these positions
        if not future.done():
            future.set_result(None)


async def _cancel(drafting: asyncio.Future[None], work: _Work) -> None:
    """End the round's unfinished work and wait for it; a cancellation of the caller passes."""
    drafting.cancel()
    for task in work.base:
        task.cancel()
    await asyncio.gather(drafting, *work.base, return_exceptions=True)
    for future in work.drafts:  # an error no position read is not "never retrieved"
        if future.done() and not future.cancelled():
            future.exception()


def _time_round(queue: list[PendingStep], work: _Work) -> None:
    """The round's seconds on its first step; each position's own in its verdict."""
    if not queue:
        return
    ended = time.perf_counter()
    drafted = [step for step in queue if step.get("drafted", True)]
    waited_draft = work.draft_ready[len(drafted) - 1] - work.started if drafted else 0.0
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
