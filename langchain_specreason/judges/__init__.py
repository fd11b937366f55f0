"""Judges decide whether a draft step is accepted. One protocol (:class:`Judge`), several judges.

=============================  ==================================================  ==========
name                           reads                                               calls
=============================  ==================================================  ==========
``score``                      the base model's 0-9 rating of the step (SpecReason)  base, 1 tok
``likelihood``                 the base model's log-probability of the step's tokens  base, 0 tok
``confidence``                 the draft model's log-probability of its own tokens   none
``arithmetic``                 each ``expression = number`` the step writes, redone  none
``learned``                    a logistic regression over the readings above        base, 0 tok
``a+b`` (:class:`CascadeJudge`)  cheap checks first; the last part decides the rest  as ``b``
=============================  ==================================================  ==========

Each judge file declares a :class:`JudgeSpec` (name, description, threshold field and range,
needs, builder); :func:`judge_specs` is the table every layer reads.

Pick one by name (``SpecReasonConfig(judge="arithmetic+likelihood")``), or pass any object
with ``async judge(ctx) -> Verdict`` to :func:`~..graph.create_specreason_graph`: the Arbitrage
router (:class:`~..arbitrage.router.RouterJudge`) and the oracle are judges too.
"""

from .arithmetic import ArithmeticJudge
from .base import Judge, JudgeSpec, Rewrite, Score, StepContext, StepScorer, Verdict
from .cascade import REJECTED_BY_CHECK, CascadeJudge
from .confidence import ConfidenceJudge
from .likelihood import LikelihoodJudge, LikelihoodScorer
from .registry import judge_specs, make_judge
from .score import JUDGE_PREFILL, JUDGE_QUESTION, BaseModelJudge, BaseModelScorer, judge_messages

__all__ = [
    "JUDGE_PREFILL",
    "JUDGE_QUESTION",
    "REJECTED_BY_CHECK",
    "ArithmeticJudge",
    "BaseModelJudge",
    "BaseModelScorer",
    "CascadeJudge",
    "ConfidenceJudge",
    "Judge",
    "JudgeSpec",
    "LikelihoodJudge",
    "LikelihoodScorer",
    "Rewrite",
    "Score",
    "StepContext",
    "StepScorer",
    "Verdict",
    "judge_messages",
    "judge_specs",
    "make_judge",
]
