"""The run folder's JSONL files: appended and flushed line by line, read back to resume.

``results.jsonl`` holds one line per (run, problem); ``runs.jsonl`` one line per run and
session (the servers' counters over it). A process killed mid-write leaves at most a torn last
line: reading skips it and appending first cuts it off, so the interrupted problem is redone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from ...errors import InputError
from .modes import Run

RESULTS = "results.jsonl"
RUNS = "runs.jsonl"
META = "meta.json"

ResultKey = tuple[
    str, float | None, str | None, str | None, str | None, int, str | None, int | None, str
]


def read_records(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file ([] if absent); a torn last line is ignored."""
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    lines.pop()  # "" after the last newline, or a torn line (that problem is run again)
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(upgrade_record(json.loads(line)))
        except json.JSONDecodeError as exc:
            raise InputError(
                f"{path}, line {number}: not valid JSON ({exc.msg}); "
                "fix or delete that line to resume"
            ) from None
    return records


RENAMED = {
    "steps_kept": "steps_accepted",
    "regenerate_s": "rewrite_s",
    "regen_s": "rewrite_s",
    "measure": "judge",
}
"""Keys of result files written before the terms were unified (old name -> name now);
``measure``: the judge of a ``bench judges`` line, named by its config field since issue 43."""


def upgrade_record(record: Any) -> Any:
    """A result line in today's words: old keys renamed, decision ``kept`` -> ``accepted``."""
    if not isinstance(record, dict):
        return record
    for old, new in RENAMED.items():
        if old in record and new not in record:
            record[new] = record.pop(old)
    steps = record.get("steps")
    for step in steps if isinstance(steps, list) else []:
        if isinstance(step, dict):
            if step.get("decision") == "kept":
                step["decision"] = "accepted"
            upgrade_record(step)
    return record


def record_key(record: dict[str, Any]) -> ResultKey:
    """The resume key of a result: (mode, threshold, score_method, variant, problem_id)."""
    return Run.of(record).key(str(record["problem_id"]))


def done_keys(records: Iterable[dict[str, Any]]) -> set[ResultKey]:
    """Keys of the results already written."""
    return {record_key(r) for r in records}


class JsonlAppender:
    """Appends one JSON object per line, flushed and fsynced, after cutting a torn last line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[str] | None = None

    def __enter__(self) -> JsonlAppender:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _cut_torn_tail(self.path)
        self._fh = self.path.open("a", encoding="utf-8")
        return self

    def write(self, record: dict[str, Any]) -> None:
        """Append ``record`` and push it to disk."""
        assert self._fh is not None, "use JsonlAppender as a context manager"
        self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _cut_torn_tail(path: Path) -> None:
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("r+b") as fh:
            fh.truncate(data.rfind(b"\n") + 1)
