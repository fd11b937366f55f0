"""The probe's prompts: a few built-in GSM8K-like questions, or the user's own file.

A file ending in ``.jsonl`` holds one JSON value a line: a string (the prompt) or an object
with a ``question``, ``prompt`` or ``problem`` field (GSM8K's and MATH's files work as they
are). Any other file holds one prompt a line. Blank lines are skipped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ..shared.prompts import INSTRUCTIONS

BUILTIN: tuple[str, ...] = (
    "A baker makes 24 muffins in the morning and 18 in the afternoon. She sells 29 of them and "
    "gives 5 to a neighbour. How many muffins does she have left?",
    "A train travels 60 km in the first hour and 75 km in each of the next 3 hours. What is its "
    "average speed over the 4 hours, in km per hour?",
    "Tom buys 3 notebooks at $4 each and 2 pens at $1.50 each. He pays with a $20 bill. How "
    "much change does he get?",
    "A garden is 12 m long and 7 m wide. A path 1 m wide runs around the outside of it. What is "
    "the area of the path, in square metres?",
)
"""GSM8K-like questions written for the probe (no dataset needed)."""

FIELDS = ("question", "prompt", "problem")
"""The fields of a JSONL object read as its prompt, in this order."""


def load_prompts(path: str | Path) -> list[str]:
    """The prompts of ``path`` (see the module's docstring); ConfigError naming the file."""
    where = Path(path)
    try:
        lines = where.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"--prompts {where}: {exc.strerror or exc}") from None
    out: list[str] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if where.suffix != ".jsonl":
            out.append(line.strip())
            continue
        try:
            value: Any = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--prompts {where}, line {number}: not JSON ({exc.msg})") from None
        if isinstance(value, dict):
            value = next((value[f] for f in FIELDS if isinstance(value.get(f), str)), None)
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(
                f"--prompts {where}, line {number}: expected a string or an object with a "
                f"{', '.join(FIELDS)} field"
            )
        out.append(value.strip())
    if not out:
        raise ConfigError(f"--prompts {where}: no prompt in the file")
    return out


def conversation(prompt: str) -> list[dict[str, Any]]:
    """The user turn the probe sends: the prompt and the benchmark's step instruction."""
    return [{"role": "user", "content": f"{prompt}\n\n{INSTRUCTIONS['number']}"}]
