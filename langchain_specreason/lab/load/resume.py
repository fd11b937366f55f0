"""Resuming a ``bench load`` folder: which groups of result lines are whole, and dropping some.

A group is a replica count (the replica comparison) or a (mode, load) cell (``--modes``): the
caller names it with ``key``, a function of a line. A group whose ``requests`` requests
(indexes 0..R-1) all have a line is done; one with some lines but not all is rerun whole, its
old lines dropped (concurrency is what is measured).

A folder holds one ``--cores`` setting (:func:`check_cores`): its cells are compared with each
other, and a base on one core is not the same server as a base on two.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from ...errors import ConfigError
from ..shared.results import META, read_records

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


def check_cores(out: Path, cores: str, default: str = "profile") -> None:
    """Refuse to resume ``out`` with another ``--cores`` than its ``meta.json`` settings hold.

    A folder without the setting was measured on the profile's cores (``default``), as every
    folder before ``--cores``. A folder without ``meta.json`` (a new one) is fine.
    """
    path = out / META
    try:
        settings = json.loads(path.read_text()).get("settings") or {}
    except (OSError, ValueError, AttributeError):
        return
    had = settings.get("cores", default)
    if had != cores:
        raise ConfigError(
            f"--cores {cores}: {out} holds cells measured with --cores {had}; one folder holds "
            f"one --cores setting (its cells are compared), so give --cores {had} to resume "
            "it, or another --out"
        )
