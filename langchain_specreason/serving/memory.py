"""The memory plan of ``specreason serve``: what each server will hold, against what the host has.

Pure arithmetic (the launcher gathers the inputs: folder sizes, environments, ``/proc/meminfo``).

A vLLM server on CPU holds, resident (PSS summed over its API server, engine core and worker):

- :data:`SERVER_OVERHEAD` for the processes themselves (Python, torch, the compiled kernels);
- its weights at the served dtype, plus the folder's bytes once more (what loading leaves
  resident): ``folder x (1 + served bytes per parameter / bytes on disk)``;
- the weights of a model it loads through ``--speculative-config`` (``draft_model``,
  ``eagle``, ...: the ``sd`` variants' drafter), the same way and at the same dtype; its KV
  cache comes out of the server's;
- its KV cache: ``VLLM_CPU_KVCACHE_SPACE`` GiB when set (vLLM reads it over the flag), else
  ``--kv-cache-memory-bytes``. Else vLLM 0.32's CPU worker reserves its
  ``--gpu-memory-utilization`` share of the host for itself and takes as KV cache what is left
  of it once the worker is loaded (share - the worker's resident memory): the plan counts the
  share minus the weights and :data:`WORKER_RUNTIME`, so the weights are not counted twice.

Calibrated on the measurements in ``serve/README.md`` (cpu-test, float32): predicted 3.75 GiB
for a draft server with 1 GiB of KV cache (measured 3.6), 6.55 GiB for a base server with 1 GiB
(measured 6.7 in the ``--replicas 2`` run), 12.0 GiB for four 135M servers with 256 MiB each and
two routers (measured 11.7). A plan fits when its need plus :data:`RESERVE` is at most the
host's ``MemAvailable``.

GPU profiles: the servers sharing a device split it by ``--gpu-memory-utilization``; a device
whose shares add up to more than 1 is refused (:func:`check_gpu_shares`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, MemoryPlanError

GIB = 2**30
MIB = 2**20

SERVER_OVERHEAD = 2 * GIB
"""Per vLLM CPU server, besides weights and KV cache (serve/README.md: API server 0.64-0.96
GiB, engine core 0.57 GiB, the worker's runtime beyond its weights and cache ~0.9 GiB)."""

WORKER_RUNTIME = 9 * GIB // 10
"""The part of :data:`SERVER_OVERHEAD` that is the worker's own (inside its
``--gpu-memory-utilization`` reservation on CPU)."""

ROUTER_BYTES = 80 * MIB
"""One ``vllm-router`` (measured 70 MiB)."""

RESERVE = 3 * GIB // 2
"""Left available once every server is up: the page cache, the client, the first compiles."""

REPLICA_KV = 256 * MIB
"""KV cache of each CPU replica unless its role's cache was set on the command line (the
integration tests' measured point), raised to hold one full sequence where a model needs it."""

KV_STEP = 64 * MIB
"""Replica KV sizes are rounded up to this."""

VLLM_GPU_UTILIZATION = 0.92
"""vLLM's default ``--gpu-memory-utilization`` (on CPU: the share of the host's memory)."""

KV_ENV = "VLLM_CPU_KVCACHE_SPACE"
KV_FLAG = "--kv-cache-memory-bytes"
UTIL_FLAG = "--gpu-memory-utilization"

_DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
}


@dataclass(frozen=True)
class ServerNeed:
    """What one server is planned to hold."""

    label: str
    """``draft``, ``base replica 2``, ..."""
    kv: int
    """KV cache bytes."""
    weights: int | None
    """Weights resident, bytes (None: the model's size is not known here, not counted)."""
    overhead: int = SERVER_OVERHEAD
    drafter: int | None = 0
    """Weights of the model loaded through ``--speculative-config``, resident, bytes (0: none;
    None: one whose size is not known here, not counted)."""

    @property
    def total(self) -> int:
        """Bytes planned for the server."""
        return self.overhead + self.kv + (self.weights or 0) + (self.drafter or 0)

    def describe(self) -> str:
        """``draft replica 1: 3.0 GiB (KV cache 256 MiB, weights 0.75 GiB)``."""
        weights = "size unknown" if self.weights is None else f"weights {gib(self.weights)}"
        if self.drafter != 0:
            weights += ", drafter " + (
                "size unknown" if self.drafter is None else gib(self.drafter)
            )
        return f"{self.label}: {gib(self.total)} (KV cache {size(self.kv)}, {weights})"


@dataclass(frozen=True)
class MemoryPlan:
    """Every server and router of a ``serve`` plan against the host's available memory."""

    servers: tuple[ServerNeed, ...]
    available: int
    routers: int = 0
    reserve: int = RESERVE

    @property
    def need(self) -> int:
        """Bytes the plan holds once everything is up."""
        return sum(s.total for s in self.servers) + self.routers * ROUTER_BYTES

    @property
    def fits(self) -> bool:
        """The plan leaves at least :attr:`reserve` available."""
        return self.need + self.reserve <= self.available

    def summary(self) -> str:
        """One line: the need, the reserve and what is available."""
        return (
            f"memory plan: {gib(self.need)} for {len(self.servers)} server(s)"
            + (f" and {self.routers} router(s)" if self.routers else "")
            + f" + {gib(self.reserve)} reserve, {gib(self.available)} available"
        )

    def refusal(self, *, replicas: int = 1) -> str:
        """Why the plan is refused, and the fixes."""
        fixes = []
        if replicas > 1:
            fixes.append(f"fewer replicas (--replicas {replicas - 1})")
        fixes.append(
            "a smaller KV cache (--draft-env / --base-env VLLM_CPU_KVCACHE_SPACE=1, or "
            "VLLM_CPU_KVCACHE_SPACE= with --draft-arg/--base-arg=--kv-cache-memory-bytes=256M)"
        )
        fixes.append("one role at a time (--only draft / --only base, e.g. on two hosts)")
        fixes.append("stopping other servers on this host")
        per = "; ".join(s.describe() for s in self.servers)
        return (
            f"not enough memory: the plan needs {gib(self.need)} plus a {gib(self.reserve)} "
            f"reserve, and {gib(self.available)} is available ({per}). Fixes: "
            + ", ".join(fixes)
            + "; or --ignore-memory-plan to start anyway"
        )

    def check(self, *, replicas: int = 1) -> None:
        """Raise :class:`MemoryPlanError` unless the plan fits."""
        if not self.fits:
            raise MemoryPlanError(self.refusal(replicas=replicas))


def gib(n: int) -> str:
    """Bytes as ``1.5 GiB``."""
    return f"{n / GIB:.1f} GiB"


def size(n: int) -> str:
    """Bytes as MiB below 1 GiB (``256 MiB``), else GiB (``1.0 GiB``)."""
    return f"{n // MIB} MiB" if n < GIB else gib(n)


def parse_bytes(value: str) -> int:
    """A vLLM byte count: ``268435456``, ``256M`` (binary), ``1.5g`` (decimal)."""
    text = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT]?)", text)
    if not match:
        raise ConfigError(f"{KV_FLAG} takes a byte count such as 268435456 or 256M, got {value!r}")
    number, suffix = match.groups()
    if not suffix:
        return int(float(number))
    if suffix.isupper():
        if "." in number:
            raise ConfigError(f"{KV_FLAG}: no decimals with a binary suffix, got {value!r}")
        return int(number) * 2 ** (10 * "KMGT".index(suffix) + 10)
    return int(float(number) * 10 ** (3 * "kmgt".index(suffix) + 3))


def flag_value(args: Sequence[str], flag: str) -> str | None:
    """The last value of ``flag`` in ``args`` (``--flag V`` or ``--flag=V``), else None."""
    found = None
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith(flag + "="):
            found = arg.split("=", 1)[1]
    return found


def kv_bytes(
    env: Mapping[str, str], args: Sequence[str], total_memory: int, *, weights: int = 0
) -> int:
    """KV cache bytes a CPU server takes, as vLLM reads its settings (see the module).

    ``weights``: the server's resident weights (its drafter's included), which a
    ``--gpu-memory-utilization`` share holds besides the KV cache.
    """
    space = env.get(KV_ENV, "")
    if space != "":
        try:
            return int(space) * GIB
        except ValueError:
            raise ConfigError(f"{KV_ENV} takes whole GiB, got {space!r}") from None
    flag = flag_value(args, KV_FLAG)
    if flag is not None:
        return parse_bytes(flag)
    share = flag_value(args, UTIL_FLAG)
    reserved = int((float(share) if share else VLLM_GPU_UTILIZATION) * total_memory)
    # the worker's reservation: its weights and runtime, the rest KV cache (vLLM refuses to
    # start when nothing is left; the plan then counts the reservation alone)
    return max(0, reserved - weights - WORKER_RUNTIME)


_NO_MODEL_METHODS = frozenset({"ngram", "ngram_gpu", "suffix", "mtp"})
"""Speculative methods that load no model of their own (``mtp``: the target's own layers)."""

_MODEL_REF = re.compile(r"\{model:([^}]+)\}")


def speculative_model(args: Sequence[str]) -> str | None:
    """The model a server loads through ``--speculative-config`` (its JSON's ``model``), else None.

    A ``{model:NAME}`` reference is the catalog model NAME. ``ngram``, ``suffix`` and ``mtp``
    load none.
    """
    value = flag_value(args, "--speculative-config")
    if value is None:
        return None
    try:
        config = json.loads(value)
    except ValueError:
        raise ConfigError(f"--speculative-config takes JSON, got {value!r}") from None
    if not isinstance(config, dict):
        return None
    model = config.get("model")
    if not model or config.get("method") in _NO_MODEL_METHODS:
        return None
    match = _MODEL_REF.fullmatch(str(model))
    return match.group(1) if match else str(model)


def dtype_bytes(args: Sequence[str], config: Mapping[str, Any] | None) -> tuple[int, int]:
    """``(served, on disk)`` bytes per parameter: ``--dtype``, and the config's dtype (bf16)."""
    stored = str((config or {}).get("dtype") or (config or {}).get("torch_dtype") or "bfloat16")
    disk = _DTYPE_BYTES.get(stored, 2)
    served = flag_value(args, "--dtype")
    return (_DTYPE_BYTES.get(served, disk) if served else disk), disk


def weight_bytes(folder_bytes: int, served: int, disk: int) -> int:
    """Resident weights: the weights at the served dtype, plus the folder's bytes once more."""
    return folder_bytes + folder_bytes * served // disk


def kv_per_token(config: Mapping[str, Any], dtype: int) -> int | None:
    """KV cache bytes of one token (keys and values of every layer), from ``config.json``."""
    try:
        layers = int(config["num_hidden_layers"])
        heads = int(config.get("num_attention_heads", 0))
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    return 2 * layers * kv_heads * head_dim * dtype


def replica_kv(config: Mapping[str, Any] | None, max_model_len: int | None, dtype: int) -> int:
    """KV cache of a CPU replica: :data:`REPLICA_KV`, or one full sequence and an eighth more."""
    per_token = kv_per_token(config, dtype) if config else None
    if per_token is None or not max_model_len:
        return REPLICA_KV
    one = max_model_len * per_token
    return max(REPLICA_KV, math.ceil((one + one // 8) / KV_STEP) * KV_STEP)


def mem_available(meminfo: str) -> tuple[int, int]:
    """``(MemAvailable, MemTotal)`` in bytes from the text of ``/proc/meminfo``."""
    values = {}
    for line in meminfo.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[key] = int(parts[0]) * 1024
    if "MemAvailable" not in values or "MemTotal" not in values:
        raise ConfigError("cannot read the host's memory: /proc/meminfo has no MemAvailable")
    return values["MemAvailable"], values["MemTotal"]


def host_memory(path: Path = Path("/proc/meminfo")) -> tuple[int, int]:
    """``(available, total)`` bytes of this host (Linux)."""
    try:
        return mem_available(path.read_text())
    except OSError as exc:
        raise ConfigError(
            f"cannot read the host's memory ({path}): {exc}; --ignore-memory-plan starts "
            "the servers without a memory plan"
        ) from None


def folder_bytes(folder: Path) -> int:
    """Bytes of the files in a model folder (not recursive: weights, config, tokenizer)."""
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


# --- GPU: shares of --gpu-memory-utilization per device ---------------------------------------


def gpu_share(args: Sequence[str]) -> float:
    """A server's ``--gpu-memory-utilization`` (vLLM's default when not given)."""
    value = flag_value(args, UTIL_FLAG)
    try:
        share = float(value) if value is not None else VLLM_GPU_UTILIZATION
    except ValueError:
        raise ConfigError(f"{UTIL_FLAG} takes a fraction, got {value!r}") from None
    if not 0 < share <= 1:
        raise ConfigError(f"{UTIL_FLAG} must be in (0, 1], got {share}")
    return share


def device_shares(servers: Iterable[tuple[str, str, float]]) -> dict[str, list[tuple[str, float]]]:
    """``(label, CUDA_VISIBLE_DEVICES, share)`` per server -> each device's ``(label, share)``."""
    out: dict[str, list[tuple[str, float]]] = {}
    for label, devices, share in servers:
        for device in (d.strip() for d in devices.split(",")):
            if device:
                out.setdefault(device, []).append((label, share))
    return out


def check_gpu_shares(servers: Iterable[tuple[str, str, float]]) -> None:
    """Raise :class:`MemoryPlanError` when a device's servers ask for more than all of it."""
    for device, shares in sorted(device_shares(servers).items()):
        total = sum(s for _, s in shares)
        if total > 1.0 + 1e-9:
            listed = ", ".join(f"{label} {share:g}" for label, share in shares)
            raise MemoryPlanError(
                f"GPU {device} is asked for more memory than it has: {UTIL_FLAG} adds up to "
                f"{total:.2f} ({listed}); lower the shares (--draft-arg/--base-arg="
                f"{UTIL_FLAG}=...), use fewer replicas, or --only one role; or "
                "--ignore-memory-plan to start anyway"
            )


def split_share(share: float, sharing: int) -> float:
    """A server's share when ``sharing`` replicas of it run on one device (3 decimals, down)."""
    return math.floor(share / sharing * 1000) / 1000
