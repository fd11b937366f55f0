"""``confidence``: how probable the draft model found its own step (no server call).

The draft server returns the log-probabilities of the tokens it wrote with each draft step;
this judge aggregates them (``mean``, ``min``, ``math``: see :func:`~.likelihood.aggregate`)
and keeps the step when the score is at least the threshold (a log-probability, so at most 0).
"""

from __future__ import annotations

from .base import JudgeSpec, StepContext, Verdict
from .likelihood import Aggregate, aggregate


class ConfidenceJudge:
    """``confidence``: keep the step when the draft model was confident writing it.

    Reads :attr:`~.base.StepContext.step_logprobs` (the graph asks the draft server for them);
    no server call. A step without them is accepted (nothing to judge by) and says so.
    """

    def __init__(self, *, threshold: float, logprob_aggregate: Aggregate = "mean") -> None:
        self.threshold = threshold
        self.logprob_aggregate = logprob_aggregate

    async def judge(self, ctx: StepContext) -> Verdict:
        """Aggregate the draft's own token log-probabilities and compare with the threshold."""
        if ctx.step_logprobs is None:
            return Verdict(score=0.0, accept=True, detail={"missing_logprobs": True})
        values = list(ctx.step_logprobs)
        texts: list[str | None] = [None] * len(values)
        if ctx.step_tokens is not None and len(ctx.step_tokens) == len(values):
            texts = list(ctx.step_tokens)
        value = aggregate(values, self.logprob_aggregate, texts)
        return Verdict(
            score=value,
            accept=value >= self.threshold,
            detail={
                "aggregate": self.logprob_aggregate,
                "step_tokens": len(values),
                "mean_logprob": round(aggregate(values, "mean"), 4),
                "min_logprob": round(aggregate(values, "min"), 4),
            },
        )


SPEC = JudgeSpec(
    name="confidence",
    description="the draft model's own log-probability of the step's tokens (no call)",
    build=lambda settings, draft, base, fmt: ConfidenceJudge(
        threshold=settings["confidence_threshold"], logprob_aggregate=settings["logprob_aggregate"]
    ),
    threshold_field="confidence_threshold",
    threshold_range=(float("-inf"), 0.0),
    needs=("draft_logprobs",),
)
