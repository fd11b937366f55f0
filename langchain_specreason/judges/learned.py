"""``learned``: a logistic regression over the readings one base call gives, fitted on labels.

Features, in :data:`FEATURES` order: the base model's mean, least and least-math token
log-probability of the step (one ``likelihood`` call: prompt logprobs, no decoding), the draft
model's own three (the logprobs that came with the draft step: no call), their disagreement
(base mean minus draft mean) and the arithmetic check's verdict (0 wrong, 0.5 unsure, 1 right).
The model gives P(harmless); the step is kept when it is at least the threshold.

The weights are fitted on dev labels by ``specreason bench judges --labels DEV`` (see
:mod:`langchain_specreason.lab.judges.learned`) and saved as JSON: ``{"names", "means",
"scales", "weights", "bias"}``. Pure Python: no numpy at run time.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..endpoint import Endpoint, TokenScorer
from ..errors import ConfigError
from ..formats import PromptFormat
from .arithmetic import check_step
from .base import Judge, JudgeSpec, StepContext, Verdict
from .likelihood import LikelihoodScorer, aggregate

FEATURES: tuple[str, ...] = (
    "likelihood (mean)",
    "likelihood (min)",
    "likelihood (math)",
    "confidence (mean)",
    "confidence (min)",
    "confidence (math)",
    "disagreement (base mean - draft mean)",
    "arithmetic",
)
"""Report readings the model reads, in order."""


@dataclass(frozen=True)
class LogisticModel:
    """``P(harmless) = sigmoid(bias + sum(w * (x - mean) / scale))``."""

    names: tuple[str, ...]
    means: tuple[float, ...]
    scales: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float

    def predict(self, x: Sequence[float]) -> float:
        """P(harmless) of one feature vector."""
        z = self.bias + math.fsum(
            w * max(-6.0, min(6.0, (v - m) / s))
            for w, v, m, s in zip(self.weights, x, self.means, self.scales, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    def as_dict(self) -> dict[str, Any]:
        """Plain values (summary.json, a config file)."""
        return {
            "names": list(self.names),
            "means": list(self.means),
            "scales": list(self.scales),
            "weights": list(self.weights),
            "bias": self.bias,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LogisticModel:
        """The model of :meth:`as_dict`'s shape; ConfigError naming what is wrong."""
        try:
            names = tuple(str(n) for n in data["names"])
            fields = [tuple(float(v) for v in data[k]) for k in ("means", "scales", "weights")]
            bias = float(data["bias"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"learned judge weights: missing or bad field ({exc})") from None
        if any(len(f) != len(names) for f in fields) or not set(names) <= set(FEATURES):
            raise ConfigError(
                f"learned judge weights: names must be among {FEATURES} with one "
                "mean, scale and weight each"
            )
        return cls(names, fields[0], fields[1], fields[2], bias)

    @classmethod
    def load(cls, path: str | Path) -> LogisticModel:
        """Read weights saved as JSON."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"learned judge weights {path}: {exc}") from None
        return cls.from_dict(data.get("learned_weights", data))


def readings(
    likelihood: Mapping[str, Any],
    draft_logprobs: Sequence[float] | None,
    draft_tokens: Sequence[str | None] | None,
    step: str,
) -> dict[str, float]:
    """Every feature's value for one step (draft readings 0 when the draft gave no logprobs)."""
    out = {
        "likelihood (mean)": float(likelihood["mean_logprob"]),
        "likelihood (min)": float(likelihood["min_logprob"]),
        "likelihood (math)": float(likelihood["math_logprob"]),
    }
    values = list(draft_logprobs or [])
    tokens: list[str | None] = list(draft_tokens or [None] * len(values))
    if len(tokens) != len(values):
        tokens = [None] * len(values)
    out["confidence (mean)"] = aggregate(values, "mean")
    out["confidence (min)"] = aggregate(values, "min")
    out["confidence (math)"] = (
        aggregate(values, "math", tokens) if all(tokens) else out["confidence (min)"]
    )
    out["disagreement (base mean - draft mean)"] = (
        out["likelihood (mean)"] - out["confidence (mean)"]
    )
    verdict = check_step(step).verdict
    out["arithmetic"] = {"wrong": 0.0, "unsure": 0.5, "right": 1.0}[verdict]
    return out


class LearnedJudge:
    """``learned``: keep the step when the fitted model's P(harmless) is at least ``threshold``."""

    def __init__(
        self,
        endpoint: TokenScorer,
        fmt: PromptFormat,
        model: LogisticModel,
        *,
        threshold: float = 0.5,
    ) -> None:
        self.scorer = LikelihoodScorer(endpoint, fmt, logprob_aggregate="mean")
        self.model = model
        self.threshold = threshold

    async def judge(self, ctx: StepContext) -> Verdict:
        """One likelihood call on the base server; the rest is the draft's logprobs and math."""
        s = await self.scorer.score(ctx.conversation, ctx.steps, ctx.step)
        values = readings(s.detail, ctx.step_logprobs, ctx.step_tokens, ctx.step)
        p = self.model.predict([values[n] for n in self.model.names])
        return Verdict(
            score=p,
            accept=p >= self.threshold,
            seconds=s.seconds,
            prompt_tokens=s.prompt_tokens,
            cached_tokens=s.cached_tokens,
            detail={"p_harmless": round(p, 4), **{k: round(v, 4) for k, v in values.items()}},
        )


def _build(
    settings: Mapping[str, Any], draft: Endpoint, base: Endpoint, fmt: PromptFormat
) -> Judge:
    if not settings.get("learned_weights"):
        raise ConfigError(
            "the learned judge needs learned_weights: a JSON file of fitted weights "
            "(the summary.json `specreason bench judges --labels DEV` writes) and "
            "learned_threshold (that file's learned_threshold)"
        )
    model = LogisticModel.load(settings["learned_weights"])
    return LearnedJudge(base, fmt, model, threshold=settings["learned_threshold"])  # type: ignore[arg-type]


SPEC = JudgeSpec(
    name="learned",
    description="a logistic regression fitted on rollout labels over the base model's and the "
    "draft's log-probabilities of the step and the arithmetic check (one base call)",
    build=_build,
    threshold_field="learned_threshold",
    threshold_range=(0.0, 1.0),
    needs=("base_prompt_logprobs", "draft_logprobs"),
)
