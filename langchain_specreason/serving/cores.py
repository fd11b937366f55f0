"""CPU core lists: which cores each server's vLLM threads run on, read and checked.

A CPU profile declares the cores of each server (``cores = "0"`` in ``[draft]``, ``"1"`` in
``[base]``); :func:`~.profiles.load_profile` turns that into the server's
``VLLM_CPU_OMP_THREADS_BIND``. vLLM's CPU worker then runs one OpenMP thread per listed core,
each pinned to its core (vLLM sets ``OMP_NUM_THREADS`` and ``OMP_PLACES``, or Intel OpenMP's
``KMP_AFFINITY``, from the list: ``vllm/utils/ompmultiprocessing.py``), so a longer list is
all a server needs to use more cores. ``auto`` would keep one core of a small machine for
vLLM's scheduler, hence explicit lists.

The rule is :func:`~.profiles.bind_cores`: a draft or base server started without the other
gets both roles' cores, unless the other runs here already (its port listens) or the caller
keeps the profile's cores (``specreason serve --keep-profile-cores``). :func:`check_cores`
refuses, before any server starts, a bound core the machine does not have and a draft and a
base server sharing a core.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..errors import ConfigError

BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"
"""vLLM's CPU thread binding: a core list (``0``, ``0-1``, ``0,2-3``; ``|`` between the lists
of tensor-parallel ranks), ``auto`` or ``nobind``."""

UNMANAGED = frozenset({"", "auto", "nobind"})
"""Bindings vLLM chooses itself (or none): not checked, never widened."""


def parse_cores(text: str, *, what: str = BIND_ENV) -> frozenset[int]:
    """The cores of a list such as ``0``, ``0-1`` or ``0,2-3|4-5`` (ConfigError otherwise)."""
    cores: set[int] = set()
    try:
        for rank in str(text).split("|"):
            for part in rank.split(","):
                first, sep, last = part.strip().partition("-")
                low, high = int(first), int(last) if sep else int(first)
                if low < 0 or high < low:
                    raise ValueError(part)
                cores.update(range(low, high + 1))
    except ValueError:
        raise ConfigError(
            f"{what}: {text!r} is not a core list (such as 0, 0-1 or 0,2-3)"
        ) from None
    return frozenset(cores)


def format_cores(cores: Iterable[int]) -> str:
    """Cores as vLLM reads them, runs as ranges: ``{0, 1, 3}`` -> ``0-1,3``."""
    out: list[str] = []
    for core in sorted(set(cores)):
        if out and core - 1 == _last(out[-1]):
            out[-1] = f"{out[-1].split('-')[0]}-{core}"
        else:
            out.append(str(core))
    return ",".join(out)


def _last(run: str) -> int:
    return int(run.rsplit("-", 1)[-1])


def machine_cores() -> frozenset[int]:
    """The cores this process may run on (its affinity: a container's cpuset counts)."""
    try:
        return frozenset(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return frozenset(range(os.cpu_count() or 1))


def listening(host: str, port: int, proc_net: Path = Path("/proc/net")) -> bool:
    """Whether a TCP socket listens on ``port`` here (``/proc/net/tcp{,6}``; no socket opened).

    Any local address counts (a server on ``0.0.0.0`` or on ``127.0.0.1``); ``host`` is only
    said in messages. False where ``/proc/net`` cannot be read.
    """
    del host
    for name in ("tcp", "tcp6"):
        try:
            lines = (proc_net / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()  # sl, local address:port (hex), remote, state (0A: LISTEN)
            if len(fields) > 3 and fields[3] == "0A":
                if int(fields[1].rsplit(":", 1)[-1], 16) == port:
                    return True
    return False


def describe_cores(cores: frozenset[int]) -> str:
    """``core 1`` or ``cores 0-1``."""
    return f"{'core' if len(cores) == 1 else 'cores'} {format_cores(cores)}"


def binding(env: dict[str, str] | Iterable[tuple[str, str]]) -> str | None:
    """The ``VLLM_CPU_OMP_THREADS_BIND`` of a server's environment (None: not set)."""
    return dict(env).get(BIND_ENV)


def check_cores(
    servers: Iterable[tuple[str, str, str | None]], available: frozenset[int] | None = None
) -> None:
    """Refuse a binding to a core not in ``available`` (default: this machine's) or shared.

    ``servers``: ``(label, role, VLLM_CPU_OMP_THREADS_BIND or None)`` of each server to start.
    A draft and a base server may not share a core (replicas of one role and the router, which
    shares the draft's core by design, may). ``auto``/``nobind`` are vLLM's and not checked.
    """
    cores = machine_cores() if available is None else available
    by_role: dict[str, tuple[str, frozenset[int]]] = {}  # role: (first label, its cores)
    for label, role, bind in servers:
        if bind is None or bind.strip() in UNMANAGED:
            continue
        bound = parse_cores(bind, what=f"{BIND_ENV} of the {label} server")
        missing = sorted(bound - cores)
        if missing:
            raise ConfigError(
                f"the {label} server is bound to {describe_cores(frozenset(missing))} "
                f"({BIND_ENV}={bind}), which this machine does not have (its cores: "
                f"{format_cores(cores)})"
            )
        if role in ("draft", "base"):
            first, before = by_role.get(role, (label, frozenset()))
            by_role[role] = (first, before | bound)
    if len(by_role) == 2:
        (draft, mine), (base, theirs) = by_role["draft"], by_role["base"]
        shared = mine & theirs
        if shared:
            raise ConfigError(
                f"the {draft} and {base} servers would share {describe_cores(shared)} "
                f"({BIND_ENV} {format_cores(mine)} and {format_cores(theirs)}); give each "
                "its own cores (--draft-env / --base-env "
                f"{BIND_ENV}=...) or start one role (--only)"
            )
