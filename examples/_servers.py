"""The draft and base servers the examples talk to (shared by every example).

With ``SPECREASON_DRAFT_URL`` and ``SPECREASON_BASE_URL`` set, those servers are used (and
``SPECREASON_FAMILY``, default ``instruct``). Otherwise the ``cpu`` profile's pair is started
for the length of the example and stopped at the end (the first start fetches the models and
compiles, a few minutes; later starts take about a minute).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

SHORT: dict[str, Any] = dict(temperature=0, budget=64, step_max_tokens=48, max_tokens=64, seed=0)
"""ChatSpecReason settings that keep the examples short (CI runs them on two CPU cores)."""


@dataclass(frozen=True)
class Servers:
    draft_url: str
    base_url: str
    family: str


@contextlib.contextmanager
def servers(profile: str = "cpu") -> Iterator[Servers]:
    """The servers from the environment, else ``profile``'s pair, started and stopped here."""
    draft = os.environ.get("SPECREASON_DRAFT_URL")
    base = os.environ.get("SPECREASON_BASE_URL")
    if draft and base:
        yield Servers(draft, base, os.environ.get("SPECREASON_FAMILY", "instruct"))
        return
    if draft or base:
        raise SystemExit("set both SPECREASON_DRAFT_URL and SPECREASON_BASE_URL, or neither")

    from langchain_specreason.serving.launcher import Launcher
    from langchain_specreason.serving.profiles import load_profile

    spec = load_profile(profile)
    print(
        f"starting the {spec.name} servers ({spec.description}); the first start fetches "
        "the models and compiles, a few minutes...",
        file=sys.stderr,
        flush=True,
    )
    with Launcher(spec) as launcher:
        yield Servers(launcher.urls["draft"], launcher.urls["base"], spec.family)
