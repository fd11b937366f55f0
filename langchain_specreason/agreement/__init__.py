"""Agreement rules: whether the draft's step says what the base model's own step says.

The ``agree`` mode (``SpecReasonConfig(verify="agree")``) replaces the judge: the base model
writes its own step at each position the draft writes ahead, each request sent as soon as its
prefix is known (:mod:`~..graph.verifiers.agree`), and a rule compares the two. One rule per
file, each declaring a :class:`RuleSpec`:

==========  =================================================================
name        agree when
==========  =================================================================
``result``  the last quantity each step writes is the same (the default)
``numbers`` both steps write the same set of quantities
``text``    the texts are equal up to case, spacing and punctuation
==========  =================================================================

Quantities are read by :func:`quantities` (numbers in digits or words, normalised). Steps
without any quantity agree, under ``result`` and ``numbers``, when their words overlap by
``agree_overlap`` (Jaccard).
"""

from .base import Agreement, AgreementRule, RuleSpec
from .quantities import content_words, quantities
from .registry import check_rule, make_rule, rule_specs

__all__ = [
    "Agreement",
    "AgreementRule",
    "RuleSpec",
    "check_rule",
    "content_words",
    "make_rule",
    "quantities",
    "rule_specs",
]
