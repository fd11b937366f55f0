"""What the router reads, and the labelled-step record. Shared by label, train and serve.

The router must see the same text at training and at run time, so both build it with
:func:`router_text` and cut it to the same :data:`ROUTER_MAX_TOKENS` from the left (the
draft step, at the end, is what matters most).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NotRequired, TypedDict

ROUTER_CONFIG = "router.json"
"""File beside a trained router's weights holding its input settings (``max_tokens``, ...)."""

ROUTER_MAX_TOKENS = 512
"""Tokens the router reads; longer inputs lose their beginning (training and serving alike)."""

Author = Literal["draft", "base"]


class PrefixStep(TypedDict):
    """A step of the trace before the draft step, with who wrote it."""

    author: Author
    text: str


class LabelledStep(TypedDict):
    """One line of a label file: a position of an oracle run."""

    problem_id: str
    step_index: int
    question: str
    prefix: list[PrefixStep]
    """The trace before this position."""
    draft_step: str
    base_step: str
    draft_score: float
    base_score: float
    advantage: float
    """``base_score - draft_score``."""
    escalated: bool
    """Whether the oracle kept the base step (``advantage > tau``)."""
    harmful: NotRequired[bool]
    """Rollout labels only: the draft step lost at least the label's ``harmful_gap``."""


def router_text(
    question: str, prefix: Sequence[PrefixStep], draft_step: str, *, tag_authors: bool = True
) -> str:
    """The router's input: question, the trace (steps tagged by author), then the draft step."""
    lines = [f"Question: {question.strip()}", "", "Reasoning so far:"]
    if not prefix:
        lines.append("(none)")
    for step in prefix:
        tag = f"[{step['author']}] " if tag_authors else ""
        lines.append(f"{tag}{step['text'].strip()}")
    lines += ["", "Next step (draft):", draft_step.strip()]
    return "\n".join(lines)


def label_of(step: LabelledStep, margin: float = 0.0) -> int:
    """Training label: 1 when the base step is better by more than ``margin``."""
    return int(step["advantage"] > margin)
