"""The fixed prompt of each answer kind: the question, then one instruction line.

Every mode sends exactly the same user message for a problem, so latency and accuracy differ
only by who writes the reasoning. Steps are separated by a blank line, SpecReason's delimiter.
"""

from __future__ import annotations

from .datasets import Grader, Problem

INSTRUCTIONS: dict[Grader, str] = {
    "number": (
        "Reason step by step, separating steps with a blank line, and end with 'The answer is N.'"
    ),
    "math": (
        "Reason step by step, separating steps with a blank line, "
        "and put the final answer in \\boxed{}."
    ),
    "choice": (
        "Reason step by step, separating steps with a blank line, "
        "and end with 'The answer is X.' where X is the letter of the right choice."
    ),
}
"""GSM8K and numeric files use ``number``; MATH-500 and AIME ``math``; GPQA ``choice``."""


def build_prompt(problem: Problem) -> str:
    """The user message sent for ``problem`` in every mode."""
    return f"{problem.question.strip()}\n\n{INSTRUCTIONS[problem.grader]}"
