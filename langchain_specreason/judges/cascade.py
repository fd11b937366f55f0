"""``arithmetic`` (no model call) and the cascade: cheap checks first, a model judge after.

``arithmetic`` recomputes every equation a step writes as ``expression = number``
(:mod:`~..arithmetic`): a wrong result rejects the step; a step whose equations all hold, or
that has none, is accepted. It cannot see a right computation on the wrong numbers.

A :class:`CascadeJudge` runs its checks in order; the first that rejects decides (no model call),
otherwise the model judge decides. Written ``arithmetic+likelihood`` in settings.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from .arithmetic import check_step
from .base import Judge, StepContext, Verdict

REJECTED_BY_CHECK = -1000.0
"""The score of a step a cheap check rejected: below anything a model judge gives."""


class ArithmeticJudge:
    """``arithmetic``: reject a step that writes a wrong result; score 0 wrong, 0.5 unsure, 1."""

    async def judge(self, ctx: StepContext) -> Verdict:
        """Recompute the step's equations."""
        start = time.perf_counter()
        check = check_step(ctx.step)
        score = {"wrong": 0.0, "unsure": 0.5, "right": 1.0}[check.verdict]
        return Verdict(
            score=score, accept=check.verdict != "wrong",
            seconds=time.perf_counter() - start,
            detail={"arithmetic": check.verdict, "equations": check.checked,
                    "wrong": [eq.text for eq in check.wrong]},
        )


class CascadeJudge:
    """Checks first (a rejection is final), then the model judge."""

    def __init__(self, checks: Sequence[Judge], judge: Judge) -> None:
        self.checks = list(checks)
        self.judge_ = judge

    async def judge(self, ctx: StepContext) -> Verdict:
        """The first rejecting check's verdict, else the model judge's (details merged)."""
        detail: dict[str, object] = {}
        seconds = 0.0
        for check in self.checks:
            verdict = await check.judge(ctx)
            seconds += verdict.seconds
            detail.update(verdict.detail)
            if not verdict.accept:
                return Verdict(score=REJECTED_BY_CHECK, accept=False, seconds=seconds,
                               detail={**detail, "decided_by": "check"})
        verdict = await self.judge_.judge(ctx)
        return Verdict(score=verdict.score, accept=verdict.accept,
                       seconds=seconds + verdict.seconds, prompt_tokens=verdict.prompt_tokens,
                       cached_tokens=verdict.cached_tokens,
                       detail={**detail, **verdict.detail, "decided_by": "judge"},
                       rewrite=verdict.rewrite)
