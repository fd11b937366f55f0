"""The oracle judge: both models write the step; the base step wins by more than ``tau``.

It writes the base step from the same request that wrote the draft (same prefix, same stop
rules and cap), scores both with a :class:`~langchain_specreason.judges.StepScorer`, and
rejects the draft when ``advantage = score(base) - score(draft) > tau``. The rejected draft's
replacement travels in the verdict, so the graph never asks the base model twice.
"""

from __future__ import annotations

import asyncio
import time

from ..endpoint import Endpoint
from ..graph.steps import step_finish
from ..judges import Rewrite, StepContext, StepScorer, Verdict


class OracleJudge:
    """Escalate exactly where the base model's step scores better (labeller, upper bound).

    ``scorer`` rates both steps: :class:`~langchain_specreason.judges.BaseModelScorer` (the
    base model's 0-9 score) or :class:`~langchain_specreason.judges.LikelihoodScorer`. Example::

        scorer = BaseModelScorer(base, get_format("instruct"), score_method="average")
        graph = create_specreason_graph(draft, base, judge=OracleJudge(base, scorer))
    """

    def __init__(self, base: Endpoint, scorer: StepScorer, *, tau: float = 0.0) -> None:
        self.base = base
        self.scorer = scorer
        self.tau = tau

    async def judge(self, ctx: StepContext) -> Verdict:
        """Write the base step, score both, keep the better one."""
        start = time.perf_counter()
        done = await self.base.complete(ctx.request)
        base_text, _ = step_finish(done, ctx.delimiter, ctx.thinking_end)  # as the trace has it
        draft_score, base_score = await asyncio.gather(
            self.scorer.score(ctx.conversation, ctx.steps, ctx.step),
            self.scorer.score(ctx.conversation, ctx.steps, base_text),
        )
        advantage = base_score.value - draft_score.value
        accept = advantage <= self.tau
        return Verdict(
            score=draft_score.value,
            accept=accept,
            seconds=time.perf_counter() - start,
            prompt_tokens=draft_score.prompt_tokens + base_score.prompt_tokens,
            cached_tokens=(draft_score.cached_tokens or 0) + (base_score.cached_tokens or 0),
            detail={
                "draft_score": draft_score.value,
                "base_score": base_score.value,
                "advantage": advantage,
                "base_step": base_text,
                "base_step_tokens": done.completion_tokens,
                "tau": self.tau,
            },
            rewrite=None
            if accept
            else Rewrite(
                text=done.text,
                tokens=done.completion_tokens,
                seconds=done.seconds,
                finish_reason=done.finish_reason,
                stop_reason=done.stop_reason,
            ),
        )
