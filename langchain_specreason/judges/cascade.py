"""The cascade: cheap checks first (``arithmetic``, :mod:`.arithmetic`), a model judge after.

A :class:`CascadeJudge` runs its checks in order; the first that rejects decides (no model call),
otherwise the model judge decides. Written ``arithmetic+likelihood`` in settings.
"""

from __future__ import annotations

from collections.abc import Sequence

from .base import Judge, StepContext, Verdict

REJECTED_BY_CHECK = -1000.0
"""The score of a step a cheap check rejected: below anything a model judge gives."""


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
                return Verdict(
                    score=REJECTED_BY_CHECK,
                    accept=False,
                    seconds=seconds,
                    detail={**detail, "decided_by": "check"},
                )
        verdict = await self.judge_.judge(ctx)
        return Verdict(
            score=verdict.score,
            accept=verdict.accept,
            seconds=seconds + verdict.seconds,
            prompt_tokens=verdict.prompt_tokens,
            cached_tokens=verdict.cached_tokens,
            detail={**detail, **verdict.detail, "decided_by": "judge"},
            rewrite=verdict.rewrite,
        )
