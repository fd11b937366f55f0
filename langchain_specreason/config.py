"""The SpecReason knobs, validated once. Names match the paper's reference code where it has one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

from .errors import ConfigError

ScoreMethod = Literal["greedy", "average"]
Wording = Literal["short", "reference"]
Aggregate = Literal["mean", "min", "math"]

JUDGES: dict[str, str] = {
    "score": "the base model rates the step 0-9 in one token (SpecReason's judge); "
             "threshold: `threshold` (0-10)",
    "likelihood": "the base model's log-probability of the step's tokens (one forward pass); "
                  "threshold: `likelihood_threshold` (a log-probability, <= 0)",
    "confidence": "the draft model's own log-probability of the step's tokens (no call); "
                  "threshold: `confidence_threshold` (<= 0)",
    "arithmetic": "recomputes each `expression = number` the step writes (no call); "
                  "rejects a wrong result",
}
"""The judges known by name. ``a+b`` composes them: every part but the last is a cheap check
whose rejection is final; the last decides the rest (``arithmetic+likelihood``)."""

THRESHOLD_FIELDS: dict[str, str] = {"score": "threshold",
                                     "likelihood": "likelihood_threshold",
                                     "confidence": "confidence_threshold"}
"""The setting that holds each judge's threshold (``arithmetic`` has none)."""

def judge_settings(judge: str, threshold: float | None = None) -> dict[str, Any]:
    """Config fields selecting ``judge`` and, when given, its threshold on its own scale."""
    settings: dict[str, Any] = {"judge": judge}
    field = THRESHOLD_FIELDS.get(parse_judge(judge)[-1])
    if threshold is not None and field is not None:
        settings[field] = threshold
    return settings


DEFAULT_JUDGE = "arithmetic+likelihood"
"""The judge of :class:`SpecReasonConfig` when none is named: the best one measured by
`specreason bench judges` (see the README). ``score`` is SpecReason's original judge."""


def parse_judge(name: str) -> list[str]:
    """The parts of a judge name (``"arithmetic+likelihood"`` -> two); ConfigError if unknown."""
    parts = [part.strip() for part in str(name).split("+")]
    for part in parts:
        if part not in JUDGES:
            raise ConfigError(f"unknown judge {part!r} in {name!r}; judges: "
                              f"{', '.join(JUDGES)} (join with + to cascade)")
    if len(set(parts)) != len(parts):
        raise ConfigError(f"judge {name!r} names a part twice")
    return parts


@dataclass(frozen=True)
class SpecReasonConfig:
    """Settings of one SpecReason run (see :mod:`langchain_specreason.state` for the terms)."""

    judge: str = DEFAULT_JUDGE
    """Which judge decides whether a draft step is kept (see :data:`JUDGES`); ``a+b`` runs the
    cheap check ``a`` first and asks ``b`` only when ``a`` does not reject."""
    threshold: float = 7.0
    """``score`` judge: keep a draft step when its score is at least this. 0 keeps every draft
    step; 10 (above the highest score, 9) rewrites every step."""
    score_method: ScoreMethod = "greedy"
    """``score`` judge: ``greedy``, the judge's sampled digit (a non-digit counts 0);
    ``average``, the probability-weighted mean of the digits among the top logprobs."""
    judge_wording: Wording = "short"
    """``score`` judge: ``short`` (our follow-up turn) or ``reference`` (the SpecReason
    reference implementation's question and prefill, word for word)."""
    likelihood_threshold: float = -3.5
    """``likelihood`` judge: keep a draft step when the base model's aggregated
    log-probability of its tokens is at least this."""
    confidence_threshold: float = -5.5
    """``confidence`` judge: keep a draft step when the draft model's aggregated
    log-probability of its own tokens is at least this."""
    logprob_aggregate: Aggregate = "math"
    """``likelihood`` and ``confidence``: ``mean`` of the step's token log-probabilities,
    ``min`` (the least likely token), or ``math`` (the least likely token holding a digit or an
    operator; 0 for a step without any: wording alone is not judged)."""
    budget: int = 8192
    """Token budget: the trace stops once the kept steps hold this many tokens."""
    step_max_tokens: int = 512
    """Cap on the tokens of one step."""
    lookahead: bool = True
    """Draft the next step while the judge reads this one (see ``lookahead`` in
    :mod:`~.state`). Same trace; faster when the two models run on separate devices."""
    first_n_base_steps: int = 0
    """The base model writes the first n steps itself, without drafting."""
    delimiter: str = "\n\n"
    """Text that ends a step."""
    temperature: float = 0.6
    """Sampling temperature of draft and rewritten steps (the judge is greedy)."""
    top_p: float = 0.95
    """Nucleus sampling of draft and rewritten steps."""
    seed: int | None = None
    """Sampling seed sent to both servers (``None``: the servers' default)."""
    repeat_window: int = 8
    """Stop when a new step repeats any of the last ``repeat_window`` kept steps (0: never)."""
    answer_by: Literal["base", "draft"] = "base"
    """Which model writes the final answer after the thinking."""
    answer_max_tokens: int = 1024
    """Cap on the tokens of the final answer."""
    judge_top_logprobs: int = 10
    """How many top logprobs the judge asks for (``average`` scoring uses them)."""

    def __post_init__(self) -> None:
        if not 0 <= self.threshold <= 10:
            raise ConfigError(
                f"threshold must be between 0 (keep every draft) and 10 (rewrite every step), "
                f"got {self.threshold}"
            )
        parse_judge(self.judge)
        for name in ("likelihood_threshold", "confidence_threshold"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or value > 0:
                raise ConfigError(f"{name} is a log-probability (<= 0), got {value!r}")
        if self.judge_wording not in ("short", "reference"):
            raise ConfigError(f"judge_wording must be 'short' or 'reference', "
                              f"got {self.judge_wording!r}")
        if self.logprob_aggregate not in ("mean", "min", "math"):
            raise ConfigError(f"logprob_aggregate must be 'mean', 'min' or 'math', "
                              f"got {self.logprob_aggregate!r}")
        if self.score_method not in ("greedy", "average"):
            raise ConfigError(f"score_method must be 'greedy' or 'average', "
                              f"got {self.score_method!r}")
        for name in ("budget", "step_max_tokens", "answer_max_tokens", "judge_top_logprobs"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        for name in ("first_n_base_steps", "repeat_window"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
        if not self.delimiter:
            raise ConfigError("delimiter must be a non-empty string")
        if not 0 <= self.temperature <= 2:
            raise ConfigError(f"temperature must be in [0, 2], got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.answer_by not in ("base", "draft"):
            raise ConfigError(f"answer_by must be 'base' or 'draft', got {self.answer_by!r}")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SpecReasonConfig:
        """Settings from ``SPECREASON_<FIELD>`` variables (e.g. ``SPECREASON_THRESHOLD=5``)."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(f"SPECREASON_{f.name.upper()}")
            if raw is None or raw == "":
                continue
            default = getattr(cls, f.name)
            try:
                if isinstance(default, bool):
                    values[f.name] = raw.lower() in ("1", "true", "yes")
                elif isinstance(default, int) or f.name == "seed":
                    values[f.name] = int(raw)
                elif isinstance(default, float):
                    values[f.name] = float(raw)
                else:
                    values[f.name] = raw.encode().decode("unicode_escape")
            except ValueError:
                raise ConfigError(f"SPECREASON_{f.name.upper()}={raw!r} is not a valid "
                                  f"{f.name}") from None
        return cls(**values)

    def judge_threshold(self) -> float | None:
        """The threshold of the judge that decides (the last part; ``None``: arithmetic)."""
        last = parse_judge(self.judge)[-1]
        field = THRESHOLD_FIELDS.get(last)
        return None if field is None else float(getattr(self, field))

    def as_dict(self) -> dict[str, Any]:
        """Plain dict of the settings (for run metadata and results files)."""
        return asdict(self)
