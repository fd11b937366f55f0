"""Resuming a ``bench load`` folder: which groups of result lines are whole, and dropping some.

A group is a replica count (the replica comparison) or a (mode, load) cell (``--modes``): the
caller names it with ``key``, a function of a line. A group whose ``requests`` requests
(indexes 0..R-1) all have a line is done; one with some lines but not all is rerun whole, its
old lines dropped (concurrency is what is measured).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from ..shared.results import read_records

K = TypeVar("K", bound=Hashable)


def done_keys(
    records: Iterable[Mapping[str, Any]], requests: int, key: Callable[[Mapping[str, Any]], K]
) -> set[K]:
    """Groups whose ``requests`` requests (indexes 0..R-1) all have a result line."""
    seen: dict[K, set[int]] = {}
    for r in records:
        seen.setdefault(key(r), set()).add(int(r["request"]))
    return {k for k, got in seen.items() if set(range(requests)) <= got}


def partial_keys(
    records: Iterable[Mapping[str, Any]], requests: int, key: Callable[[Mapping[str, Any]], K]
) -> set[K]:
    """Groups with some result lines but not all: rerun whole."""
    records = list(records)
    return {key(r) for r in records} - done_keys(records, requests, key)


def drop_keys(path: Path, keys: Collection[K], key: Callable[[Mapping[str, Any]], K]) -> int:
    """Remove the lines of groups ``keys`` from ``path`` (atomically); how many went."""
    records = read_records(path)
    keep = [r for r in records if key(r) not in keys]
    if len(keep) == len(records):
        return 0
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in keep), encoding="utf-8"
    )
    tmp.replace(path)
    return len(records) - len(keep)
