"""Verifiers: how the ``verify`` node decides the next positions of the trace.

One verifier per mode, one file each, behind one small protocol. A verifier writes or reads
draft steps and returns a :class:`Round`: the positions it decided, in order, each a
:class:`~..state.PendingStep` that is either accepted as drafted (``accept``) or rewritten by
the base model (``rewrite``; with the base's step already in ``pending["rewrite"]`` when the
verifier wrote it). The ``verify`` node (:mod:`..verify`) does the rest, the same way for every
mode: the draft circuit breaker, a draft outage (the decided positions are kept, then the base
model writes the rest), and handing the positions to ``accept``/``rewrite`` one checkpoint at a
time.

==============  =================================================================
``verify=``     the verifier
==============  =================================================================
``judge``       :class:`~.judge.JudgeVerifier`: the draft writes one step, a judge reads it
                (SpecReason, Arbitrage's router, any :class:`~...judges.Judge`)
``agree``       :class:`~.agree.AgreeVerifier`: the draft writes ``steps_ahead`` steps, the
                base model writes its own step at each position, a rule compares them
                (Lookahead Reasoning)
==============  =================================================================

What each position cost is recorded with mode-neutral meanings: ``draft_s`` (the wait on the
draft), ``judge_s`` (the wait on verification: the judge's reading, or the base's steps in the
``agree`` mode), ``base_tokens`` (what the base model generated for the position: a rewrite,
or its own step at an agreed position).
"""

from __future__ import annotations

from ...agreement import make_rule
from ...config import SpecReasonConfig
from ...endpoint import Endpoint
from ...errors import ConfigError
from ...formats import PromptFormat
from ...judges import Judge, make_judge
from ..parts import Round, Verifier
from .agree import AgreeVerifier
from .judge import JudgeVerifier

__all__ = ["AgreeVerifier", "JudgeVerifier", "Round", "Verifier", "make_verifier"]


def make_verifier(
    config: SpecReasonConfig,
    draft: Endpoint,
    base: Endpoint,
    fmt: PromptFormat,
    judge: Judge | None = None,
) -> Verifier:
    """The verifier ``config.verify`` names; ``judge`` (a custom judge) only for ``judge``."""
    if config.verify == "agree":
        if judge is not None:
            raise ConfigError(
                "a custom judge reads draft steps in the judge mode only; verify='agree' "
                "compares the draft's steps with the base model's own (agree_rule): pass one "
                "or the other"
            )
        return AgreeVerifier(make_rule(config.agree_rule, config.as_dict()))
    return JudgeVerifier(judge or make_judge(config, draft, base, fmt))
