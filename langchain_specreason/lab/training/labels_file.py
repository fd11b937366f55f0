"""Reading and validating the labels JSONL that ``specreason arbitrage label`` writes.

One JSON object per line, a :class:`~.features.LabelledStep`: every key present, a numeric
``advantage`` and a list ``prefix``. Bad input is refused with a one-line :class:`InputError`
naming the file and line; blank lines are skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...arbitrage.features import LabelledStep
from ...errors import InputError

_KEYS = tuple(LabelledStep.__annotations__)


def load_labels(path: Path) -> list[LabelledStep]:
    """The labelled steps of a JSONL label file; blank lines are skipped."""
    path = Path(path)
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
    missing = [key for key in _KEYS if key not in record]
    if missing:
        raise InputError(f"{path}, line {number}: missing keys {', '.join(missing)}")
    advantage = record["advantage"]
    if isinstance(advantage, bool) or not isinstance(advantage, int | float):
        raise InputError(f"{path}, line {number}: advantage must be a number, got {advantage!r}")
    if not isinstance(record["prefix"], list):
        raise InputError(f"{path}, line {number}: prefix must be a list of steps")
    return record  # type: ignore[return-value]


__all__ = ["load_labels"]
