"""Judges by name: :func:`make_judge` turns a :class:`~..config.SpecReasonConfig` into a judge."""

from __future__ import annotations

from ..config import SpecReasonConfig, parse_judge
from ..endpoint import Endpoint, TokenScorer
from ..errors import ConfigError
from ..formats import PromptFormat
from .arithmetic import ArithmeticJudge
from .base import Judge
from .cascade import CascadeJudge
from .confidence import ConfidenceJudge
from .learned import LearnedJudge, LogisticModel
from .likelihood import LikelihoodJudge
from .score import BaseModelJudge


def _one(
    name: str, config: SpecReasonConfig, draft: Endpoint, base: Endpoint, fmt: PromptFormat
) -> Judge:
    if name == "score":
        return BaseModelJudge(
            base,
            fmt,
            threshold=config.threshold,
            method=config.score_method,
            top_logprobs=config.judge_top_logprobs,
            wording=config.judge_wording,
        )
    if name == "likelihood":
        if not isinstance(base, TokenScorer):
            raise ConfigError(
                "the likelihood judge needs a base endpoint that tokenizes and "
                "returns prompt logprobs (an OpenAIEndpoint on a vLLM server)"
            )
        return LikelihoodJudge(
            base, fmt, threshold=config.likelihood_threshold, how=config.logprob_aggregate
        )
    if name == "confidence":
        return ConfidenceJudge(threshold=config.confidence_threshold, how=config.logprob_aggregate)
    if name == "learned":
        if not isinstance(base, TokenScorer):
            raise ConfigError(
                "the learned judge needs a base endpoint that tokenizes and returns prompt "
                "logprobs (an OpenAIEndpoint on a vLLM server)"
            )
        if not config.learned_weights:
            raise ConfigError(
                "the learned judge needs learned_weights: a JSON file of fitted weights "
                "(the summary.json `specreason bench judges --labels DEV` writes) and "
                "learned_threshold (that file's learned_threshold)"
            )
        model = LogisticModel.load(config.learned_weights)
        return LearnedJudge(base, fmt, model, threshold=config.learned_threshold)
    return ArithmeticJudge()


def make_judge(
    config: SpecReasonConfig, draft: Endpoint, base: Endpoint, fmt: PromptFormat
) -> Judge:
    """The judge ``config.judge`` names, with its settings (a cascade for ``a+b``)."""
    parts = [_one(name, config, draft, base, fmt) for name in parse_judge(config.judge)]
    return parts[0] if len(parts) == 1 else CascadeJudge(parts[:-1], parts[-1])
