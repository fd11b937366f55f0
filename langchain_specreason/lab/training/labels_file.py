"""Reading and validating the labels the router trains on: either kind of label file.

* ``specreason arbitrage label`` writes one :class:`~.features.LabelledStep` a line: every key
  present, a numeric ``advantage`` and a list ``prefix``.
* ``specreason label`` (rollout labels, :mod:`..labels.rollout`) writes ``question``,
  ``steps`` (the draft's trace before the step), ``step`` (the draft's step), ``base_step``,
  ``draft_rate``, ``base_rate`` and ``advantage = base_rate - draft_rate``; such a line is read
  as a labelled step (:func:`from_rollout`): the prefix steps are the draft's, the scores are
  the two success rates, and ``harmful`` is kept. ``specreason arbitrage train --dataset
  benchmarks/labels-cpu/dev`` reads such a folder directly.

Bad input is refused with a one-line :class:`InputError` naming the file and line; blank lines
are skipped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...arbitrage.features import LabelledStep
from ...errors import InputError

_KEYS = tuple(k for k in LabelledStep.__annotations__ if k != "harmful")  # harmful: optional

ROLLOUT_KEYS = ("problem_id", "question", "steps", "step", "base_step", "draft_rate", "base_rate")
"""The keys of a rollout label line (``specreason label``) besides ``advantage``."""


def load_labels(path: Path) -> list[LabelledStep]:
    """The labelled steps of a JSONL label file (or a label folder's ``labels.jsonl``).

    Lines of ``specreason label`` (rollout labels) are read by :func:`from_rollout`; blank
    lines are skipped.
    """
    path = labels_path(path)
    if not path.is_file():
        raise InputError(
            f"label file {path} not found; write it with `specreason arbitrage label` first"
        )
    steps: list[LabelledStep] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            steps.append(_parse_line(path, number, line))
    if not steps:
        raise InputError(f"label file {path} is empty; label some problems first")
    return steps


def _parse_line(path: Path, number: int, line: str) -> LabelledStep:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}, line {number}: not valid JSON ({exc.msg}); fix or delete that line"
        ) from None
    if not isinstance(record, dict):
        raise InputError(
            f"{path}, line {number}: expected a JSON object, got {type(record).__name__}"
        )
    if "draft_step" not in record and "step" in record and "steps" in record:
        return from_rollout(record, f"{path}, line {number}")
    missing = [key for key in _KEYS if key not in record]
    if missing:
        raise InputError(f"{path}, line {number}: missing keys {', '.join(missing)}")
    advantage = record["advantage"]
    if isinstance(advantage, bool) or not isinstance(advantage, int | float):
        raise InputError(f"{path}, line {number}: advantage must be a number, got {advantage!r}")
    if not isinstance(record["prefix"], list):
        raise InputError(f"{path}, line {number}: prefix must be a list of steps")
    return record  # type: ignore[return-value]


def from_rollout(record: dict[str, Any], where: str = "rollout label") -> LabelledStep:
    """A rollout label (a line of ``specreason label``) as the router's labelled step.

    The router reads the question, the draft's steps so far and the draft's step; its target
    is the rollout ``advantage`` (``base_rate - draft_rate``), scores are the two rates.
    """
    missing = [key for key in (*ROLLOUT_KEYS, "advantage") if key not in record]
    if missing:
        raise InputError(f"{where}: missing keys {', '.join(missing)}")
    steps = record["steps"]
    if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
        raise InputError(f"{where}: steps must be a list of strings (the trace before the step)")
    numbers = {k: record[k] for k in ("advantage", "draft_rate", "base_rate")}
    for key, value in numbers.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(f"{where}: {key} must be a number, got {value!r}")
    step: LabelledStep = {
        "problem_id": str(record["problem_id"]),
        "step_index": int(record.get("step_index", len(steps))),
        "question": str(record["question"]),
        "prefix": [{"author": "draft", "text": text} for text in steps],
        "draft_step": str(record["step"]),
        "base_step": str(record["base_step"]),
        "draft_score": float(record["draft_rate"]),
        "base_score": float(record["base_rate"]),
        "advantage": float(record["advantage"]),
        "escalated": float(record["advantage"]) > 0,
    }
    if isinstance(record.get("harmful"), bool):
        step["harmful"] = record["harmful"]
    return step


def labels_path(dataset: str | Path) -> Path:
    """The labels file of ``dataset``: the file itself, or ``labels.jsonl`` in a folder."""
    path = Path(dataset)
    return path / "labels.jsonl" if path.is_dir() else path


__all__ = ["ROLLOUT_KEYS", "from_rollout", "labels_path", "load_labels"]
