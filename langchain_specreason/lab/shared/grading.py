"""Marking a reply right or wrong. Pure functions.

* ``number`` (GSM8K): the last number in the reply, commas stripped, compared numerically;
* ``math`` (MATH-500, AIME): ``math-verify`` parses the reply's final answer (``\\boxed{}``
  first) and checks it against the gold expression symbolically, not as strings;
* ``choice`` (GPQA): the letter after "answer is", else in ``\\boxed{}``, else the last
  ``(X)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from ...errors import ConfigError
from .datasets import LETTERS, Grader

_NUMBER = re.compile(r"(?<![\d.])-?\d+(?:,\d{3})*(?:\.\d+)?|(?<![\d.])-?\.\d+")
_ANSWER_LETTER = re.compile(
    r"(?i:answer)(?:\s+(?i:is))?\s*[:=]?\s*(?:\*\*|\$)?\s*(?:\\boxed\{|\\text\{)?\s*"
    rf"\(?([{LETTERS}])(?![\w])"
)
_BOXED_LETTER = re.compile(rf"\\boxed\{{\s*(?:\\text\{{)?\s*\(?([{LETTERS}])\)?\s*\}}")
_PAREN_LETTER = re.compile(rf"\(([{LETTERS}])\)")


@dataclass(frozen=True)
class Grade:
    """The answer read from a reply and whether it matches the gold."""

    prediction: str | None
    correct: bool


def last_number(text: str) -> str | None:
    """The last number written in ``text``, commas stripped (``None``: no number)."""
    found = _NUMBER.findall(text)
    return found[-1].replace(",", "") if found else None


def same_number(a: str, b: str) -> bool:
    """Numeric equality of two decimal strings (``18`` equals ``18.00``); False if unparsable."""
    try:
        return Decimal(a.replace(",", "")) == Decimal(b.replace(",", ""))
    except InvalidOperation:
        return False


def grade_number(reply: str, gold: str) -> Grade:
    """GSM8K: the last number of the reply against the gold number."""
    prediction = last_number(reply)
    return Grade(prediction, prediction is not None and same_number(prediction, gold))


def grade_math(reply: str, gold: str) -> Grade:
    """MATH: ``math-verify`` compares the reply's final answer with the gold expression."""
    try:
        from math_verify import parse, verify
    except ImportError:
        raise ConfigError(
            "grading MATH answers needs math-verify: pip install 'langchain-specreason[bench]'"
        ) from None
    target = parse("\\boxed{" + gold + "}")
    answer = parse(reply)
    prediction = str(answer[-1]) if answer else None
    return Grade(prediction, bool(answer) and bool(target) and bool(verify(target, answer)))


def extract_letter(reply: str) -> str | None:
    """The choice letter a reply settles on (``None``: none found)."""
    for pattern in (_ANSWER_LETTER, _BOXED_LETTER, _PAREN_LETTER):
        found = pattern.findall(reply)
        if found:
            return str(found[-1])
    return None


def grade_choice(reply: str, gold: str) -> Grade:
    """Multiple choice: the reply's letter against the gold letter."""
    prediction = extract_letter(reply)
    return Grade(prediction, prediction is not None and prediction == gold.strip().upper())


def grade(grader: Grader, reply: str, gold: str) -> Grade:
    """Grade ``reply`` against ``gold`` with the problem's grader."""
    if grader == "number":
        return grade_number(reply, gold)
    if grader == "math":
        return grade_math(reply, gold)
    if grader == "choice":
        return grade_choice(reply, gold)
    raise ConfigError(f"unknown grader {grader!r}")
