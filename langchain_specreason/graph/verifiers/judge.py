"""The ``judge`` verifier (SpecReason): the draft writes one step, a judge reads it.

A blank draft is not worth judging: it is rejected without a call, and the base model writes
the step. With ``lookahead`` the draft model writes the next step while the judge reads this
one, as if this one is accepted; it is used by the next round when it is, and cancelled when
it is not (the judge's time then hides behind the draft's).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from dataclasses import dataclass

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer

from ...errors import EndpointError
from ...events import Drafted, Scored
from ...formats import to_openai_messages
from ...judges import Judge, StepContext, Verdict
from ...state import PendingStep, SpecReasonState
from ..drafting import write_draft
from ..parts import Parts, Round
from ..steps import ahead_of, step_texts
from ..tracing import Traced, served_model, traced_call


@dataclass(frozen=True)
class JudgeVerifier:
    """A :class:`~...judges.Judge` reads each draft step (``verify="judge"``)."""

    judge: Judge

    async def round(self, parts: Parts, state: SpecReasonState, config: RunnableConfig) -> Round:
        """One draft step and the judge's verdict on it (a blank draft is rejected unread)."""
        index = len(state.get("steps") or [])
        done = None
        ready = state.get("lookahead")
        if ready is not None and ready.get("index") == index:
            pending = ready  # drafted while the judge read the previous step
        else:
            try:
                pending, done = await write_draft(parts, state, config, index)
            except EndpointError as exc:
                return Round(failed=exc)
        get_stream_writer()(
            Drafted(
                type="drafted",
                step=index,
                text=pending["text"],
                tokens=pending["tokens"],
                seconds=pending["draft_s"],
            )
        )
        input_tokens = done.prompt_tokens if done is not None and index == 0 else None
        if not pending["text"].strip():
            return Round([{**pending, "accept": False}], input_tokens=input_tokens)
        judged, lookahead = await self._judge(parts, state, config, pending)
        return Round([judged], lookahead=lookahead, input_tokens=input_tokens)

    async def _judge(
        self, parts: Parts, state: SpecReasonState, config: RunnableConfig, pending: PendingStep
    ) -> tuple[PendingStep, PendingStep | None]:
        """The verdict on ``pending``; with ``lookahead``, the next draft step meanwhile."""
        cfg = parts.config
        index = len(state.get("steps") or [])
        judging = asyncio.ensure_future(
            traced_call(
                config,
                "judge_step",
                {
                    "specreason_step": index,
                    "specreason_call": "judge",
                    "specreason_judge": cfg.judge,
                    "specreason_threshold": cfg.judge_threshold(),
                },
                {"step": pending["text"]},
                lambda: self.judge.judge(_context(parts, state, pending)),
                _judged,
                model=served_model(parts.base),
            )
        )
        ahead = (
            asyncio.ensure_future(_draft_ahead(parts, state, config, pending))
            if cfg.lookahead
            else None
        )
        try:
            verdict = await judging
        except BaseException:
            if ahead is not None:
                ahead.cancel()
            raise
        get_stream_writer()(
            Scored(
                type="scored",
                step=index,
                score=verdict.score,
                accepted=verdict.accept,
                seconds=verdict.seconds,
            )
        )
        lookahead = None
        if ahead is not None and verdict.accept:
            judged = time.perf_counter()
            try:
                lookahead = await ahead
            except Exception:  # the next round drafts again and reports the error
                lookahead = None
            if lookahead is not None:  # only the wait past the judge is on the clock
                waited = time.perf_counter() - judged
                lookahead["draft_hidden_s"] = max(0.0, lookahead["draft_s"] - waited)
                lookahead["draft_s"] = min(waited, lookahead["draft_s"])
        elif ahead is not None:  # rejected: the base writes this step, the lookahead is moot
            ahead.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ahead
        rewrite = None
        if verdict.rewrite is not None and not verdict.accept:
            rewrite = dataclasses.asdict(verdict.rewrite)
        judged_step: PendingStep = {
            **pending,
            "score": verdict.score,
            "accept": verdict.accept,
            "judge_s": verdict.seconds,
            "judge_prompt_tokens": verdict.prompt_tokens,
            "judge_cached_tokens": verdict.cached_tokens,
            "verdict": verdict.detail,
            "rewrite": rewrite,
        }
        return judged_step, lookahead


async def _draft_ahead(
    parts: Parts, state: SpecReasonState, config: RunnableConfig, pending: PendingStep
) -> PendingStep | None:
    """The next draft step as if ``pending`` is accepted (None when the trace would stop)."""
    accepted = ahead_of(state, pending, parts.config)
    if accepted is None:
        return None
    step, _ = await write_draft(
        parts, accepted, config, len(accepted.get("steps") or []), lookahead=True
    )
    return step


def _context(parts: Parts, state: SpecReasonState, pending: PendingStep) -> StepContext:
    return StepContext(
        conversation=to_openai_messages(state["messages"]),
        steps=step_texts(state),
        authors=[s["author"] for s in state.get("steps") or []],
        step=pending["text"],
        request=parts.step_request(state),
        step_logprobs=pending.get("logprobs"),
        step_tokens=pending.get("logprob_tokens"),
        delimiter=parts.config.delimiter,
        thinking_end=parts.fmt.thinking_end,
    )


def _judged(verdict: Verdict) -> Traced:
    """A judge call's run: its score and decision; one output token when a server read it."""
    decision = "accepted" if verdict.accept else "rewritten"
    return Traced(
        text=f"{verdict.score:g} ({decision})",
        prompt_tokens=verdict.prompt_tokens,
        completion_tokens=1 if verdict.prompt_tokens else 0,  # max_tokens=1
        cached_tokens=verdict.cached_tokens,
        output={
            "score": verdict.score,
            "decision": decision,
            "prompt_tokens": verdict.prompt_tokens,
            "cached_tokens": verdict.cached_tokens,
            **verdict.detail,
        },
    )
