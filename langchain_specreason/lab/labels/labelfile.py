"""Read a labelled-steps file: what ``specreason bench judges --labels FILE`` judges.

One JSON object per line, one draft step each::

    {"question": "...", "steps": ["step 1\\n\\n", ...], "step": "the judged step\\n\\n",
     "harmful": true, "advantage": 0.75, "problem_id": "gsm8k-train-17", "step_index": 1}

``question``, ``steps`` (the trace before the step), ``step`` and ``harmful`` are required;
``advantage``, ``problem_id``, ``step_index`` and ``base_step`` are read when present.
``specreason label`` writes such files.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import InputError
from ..judges.data import JudgeExample
from ..shared.datasets import read_jsonl

REQUIRED = ("question", "steps", "step", "harmful")


def load_labelled_steps(path: Path) -> list[JudgeExample]:
    """The labelled steps of ``path`` as judge examples (kind ``harmful`` or ``harmless``).

    A malformed line raises :class:`~langchain_specreason.errors.InputError` naming the file
    and the line.
    """
    examples: list[JudgeExample] = []
    seen: set[str] = set()
    for number, row in read_jsonl(path, REQUIRED):
        where = f"{path}, line {number}"
        if not isinstance(row["question"], str) or not isinstance(row["step"], str):
            raise InputError(f"{where}: question and step must be strings")
        steps = row["steps"]
        if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
            raise InputError(
                f"{where}: steps must be a list of strings (the trace before the step)"
            )
        if not isinstance(row["harmful"], bool):
            raise InputError(f"{where}: harmful must be true or false, got {row['harmful']!r}")
        advantage = row.get("advantage")
        if advantage is not None and (
            isinstance(advantage, bool) or not isinstance(advantage, int | float)
        ):
            raise InputError(f"{where}: advantage must be a number, got {advantage!r}")
        problem = str(row.get("problem_id", f"line-{number}"))
        index = row.get("step_index", len(steps))
        example_id = f"{problem}:{index}"
        if example_id in seen:
            raise InputError(f"{where}: step {example_id} appears twice")
        seen.add(example_id)
        examples.append(
            JudgeExample(
                id=example_id,
                problem_id=example_id,
                question=row["question"],
                steps=tuple(steps),
                step=row["step"],
                kind="harmful" if row["harmful"] else "harmless",
                position=int(index),
                original=str(row.get("base_step") or ""),
                advantage=None if advantage is None else float(advantage),
            )
        )
    if not examples:
        raise InputError(f"{path} holds no labelled step")
    return examples
