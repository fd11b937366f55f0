"""Replica pools: N vLLM servers per role behind one ``vllm-router`` per role.

``specreason serve --profile P --replicas N`` starts, for each role (draft, base), N copies of
the profile's server and one `vllm-router <https://github.com/vllm-project/router>`_ (PyPI
``vllm-router``, extra ``scale``) in front of them. Clients keep using one URL per role: the
router listens on the role's own port, the replicas on a block of consecutive ports:

==========================  =========================================================
role port ``P_draft``       the draft router (``draft: http://HOST:P_draft/v1``)
role port ``P_base``        the base router
``R`` .. ``R+N-1``          draft replicas 1..N   (``R`` = ``--replica-port``, default
                            ``P_draft + 100``)
``R+N`` .. ``R+2N-1``       base replicas 1..N
``R+2N``, ``R+2N+1``        the draft and base routers' Prometheus ``/metrics``
==========================  =========================================================

(cpu-test: routers 8101/8102, draft replicas 8201-8202, base replicas 8203-8204, router
metrics 8205/8206.) With ``--only base`` only the base block is laid out, from ``R``.

The default policy, ``consistent_hash``, maps each request's routing key (the
``X-Session-ID`` header, :mod:`langchain_specreason.endpoint.routing`) to one replica, so the
calls of one run share one replica's prefix cache. The router is started with short health
checks, retries and a circuit breaker (:data:`FAILOVER_FLAGS`): a replica that dies is left
after a few failed attempts and its requests are retried on another replica.

Keys (:func:`guard_routers`): ``vllm-router`` has no authentication of its own, and its admin
routes (``/add_worker``, ``/remove_worker``, ``/workers``, ``/flush_cache``) would let anyone who
reaches the port add a worker that then receives the clients' keys. When the replicas require
an API key, each router starts with its key guard (:mod:`.router_main`): every route, admin and
``/health`` included, answers 401 unless the replicas accept the request's key; the router
forwards the client's ``Authorization`` header to the replica as before. Without a key a router
must stay on a loopback host: off-host it is refused.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import ConfigError, ServeError
from .memory import KV_ENV, KV_FLAG, UTIL_FLAG, gpu_share, split_share
from .profiles import Profile, Role, ServerSpec, root_url
from .router_main import VALIDATION_FLAG
from .secrets import is_loopback

POLICIES = ("consistent_hash", "cache_aware", "power_of_two", "round_robin", "random")
"""``vllm-router --policy`` values offered by ``specreason serve --router-policy``."""

DEFAULT_POLICY = "consistent_hash"
"""Affinity by routing key: every call of a run (same ``X-Session-ID``) on one replica."""

MAX_REPLICAS = 32
REPLICA_PORT_OFFSET = 100
"""Default first replica port: the draft port plus this."""

FAILOVER_FLAGS: tuple[str, ...] = (
    # a failed attempt is retried (5 attempts, 100 ms backoff growing 1.5x); the circuit
    # breaker of a replica opens after 3 failures, so attempts 4 and 5 go to another replica
    "--retry-max-retries",
    "5",
    "--retry-initial-backoff-ms",
    "100",
    "--cb-failure-threshold",
    "3",
    "--cb-timeout-duration-secs",
    "30",
    # a dead replica is marked unhealthy within ~10 s even when no request finds it
    "--health-check-endpoint",
    "/health",
    "--health-check-interval-secs",
    "5",
    "--health-failure-threshold",
    "2",
    "--health-success-threshold",
    "1",
    # generations may be long: as the client's own generation timeout
    "--request-timeout-secs",
    "1800",
)


@dataclass(frozen=True)
class RouterSpec:
    """One ``vllm-router`` in front of a role's replicas."""

    role: Role
    port: int
    metrics_port: int
    workers: tuple[str, ...]
    """Root URLs of the replicas (no ``/v1``), as the router wants them."""
    policy: str = DEFAULT_POLICY
    host: str = "127.0.0.1"
    key_check: tuple[str, ...] = ()
    """URLs that must accept a request's key (the replicas' ``/v1/models``); empty: no guard."""

    @property
    def url(self) -> str:
        """The OpenAI-compatible base URL clients use, ending in ``/v1``."""
        return f"{root_url(self.host, self.port)}/v1"


@dataclass(frozen=True)
class ReplicaPlan:
    """The replicas and routers of ``specreason serve --replicas N``."""

    replicas: dict[Role, tuple[ServerSpec, ...]]
    routers: dict[Role, RouterSpec]

    def servers(self) -> tuple[ServerSpec, ...]:
        """Every replica, draft ones first."""
        return tuple(spec for specs in self.replicas.values() for spec in specs)

    def ports(self) -> list[tuple[str, int]]:
        """Every port the plan listens on, with the host."""
        out = [(s.host, s.port) for s in self.servers()]
        for router in self.routers.values():
            out += [(router.host, router.port), ("127.0.0.1", router.metrics_port)]
        return out


def check_replicas(replicas: int) -> int:
    """``replicas`` if it is a usable pool size, else :class:`ConfigError`."""
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        raise ConfigError(f"--replicas must be a whole number, got {replicas!r}")
    if not 1 <= replicas <= MAX_REPLICAS:
        raise ConfigError(f"--replicas must be between 1 and {MAX_REPLICAS}, got {replicas}")
    return replicas


def plan_replicas(
    profile: Profile,
    replicas: int,
    *,
    roles: Sequence[Role] = ("draft", "base"),
    policy: str = DEFAULT_POLICY,
    replica_port: int | None = None,
    gpus: int | None = None,
    kv_cache: Mapping[Role, int] | None = None,
) -> ReplicaPlan:
    """Lay out ``replicas`` servers per role and a router per role (see the module's table).

    ``kv_cache``: bytes of KV cache per replica of a role (CPU): each replica of that role then
    runs with ``VLLM_CPU_KVCACHE_SPACE`` unset and ``--kv-cache-memory-bytes`` set. GPU replicas
    that must share a device split its ``--gpu-memory-utilization`` (:func:`replica_devices`).

    Raises :class:`ConfigError` for a bad pool size, a policy the router lacks, the Arbitrage
    router role (it is not replicated), or a port block that overlaps the profile's ports or
    runs past 65535.
    """
    check_replicas(replicas)
    if policy not in POLICIES:
        raise ConfigError(f"--router-policy must be one of {', '.join(POLICIES)}, not {policy!r}")
    pooled = [r for r in roles if r in ("draft", "base")]
    if "router" in roles or not pooled:
        raise ConfigError(
            "--replicas applies to the draft and base servers; the Arbitrage "
            "router server is not replicated (drop --only router)"
        )
    first = replica_port if replica_port is not None else profile.draft.port + REPLICA_PORT_OFFSET
    last = first + len(pooled) * replicas + len(pooled) - 1
    if first < 1024 or last > 65535:
        raise ConfigError(
            f"replica ports {first}-{last} are outside 1024-65535; pick another --replica-port"
        )
    taken = {s.port: s.role for s in profile.servers()}
    clash = sorted(p for p in range(first, last + 1) if p in taken)
    if clash:
        raise ConfigError(
            f"replica ports {first}-{last} overlap the {taken[clash[0]]} server's "
            f"port {clash[0]}; pick another --replica-port"
        )
    specs: dict[Role, tuple[ServerSpec, ...]] = {}
    port = first
    devices, sharing = (
        replica_devices(profile, pooled, replicas, gpus) if profile.device == "gpu" else ({}, 1)
    )
    for role in pooled:
        spec = profile.draft if role == "draft" else profile.base
        env, args = spec.env, spec.args
        if sharing > 1:
            share = split_share(gpu_share(args), sharing)
            args = (*args, f"{UTIL_FLAG}={share}")
        if kv_cache and role in kv_cache:
            env = (*((k, v) for k, v in env if k != KV_ENV), (KV_ENV, ""))
            args = (*args, f"{KV_FLAG}={kv_cache[role]}")
        specs[role] = tuple(
            replace(spec, port=port + i, args=args, env=_with_devices(env, devices.get((role, i))))
            for i in range(replicas)
        )
        port += replicas
    routers: dict[Role, RouterSpec] = {}
    for role in pooled:
        spec = profile.draft if role == "draft" else profile.base
        routers[role] = RouterSpec(
            role=role,
            port=spec.port,
            metrics_port=port,
            policy=policy,
            host=spec.host,
            workers=tuple(root_url(s.host, s.port) for s in specs[role]),
        )
        port += 1
    return ReplicaPlan(specs, routers)


def guard_routers(plan: ReplicaPlan, *, keyed: bool) -> ReplicaPlan:
    """``plan`` with each router's key guard when the replicas require a key.

    ``keyed``: every replica requires an API key. Then each router checks the key of every
    request against its own replicas' ``/v1/models`` (:mod:`.router_main`). Without a key, a
    router on a non-loopback host is a :class:`ConfigError`: its admin routes would be open to
    anyone who can reach the port (a worker added there receives the clients' requests).
    """
    routers: dict[Role, RouterSpec] = {}
    for role, router in plan.routers.items():
        if keyed:
            urls = tuple(f"{s.url}/models" for s in plan.replicas[role])
            routers[role] = replace(router, key_check=urls)
        elif not is_loopback(router.host):
            raise ConfigError(
                f"refusing to start the {role} router on {router.host or '(every interface)'} "
                "without an API key: vllm-router has no authentication of its own, so its admin "
                "routes (/add_worker, /remove_worker, /flush_cache) would be open to anyone who "
                "can reach the port; set a key (--api-key KEY or VLLM_API_KEY=KEY) or keep the "
                "default host 127.0.0.1"
            )
        else:
            routers[role] = router
    return replace(plan, routers=routers)


def visible_gpus() -> int | None:
    """GPUs this machine shows: ``CUDA_VISIBLE_DEVICES``, else ``nvidia-smi -L`` (or None)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return len([d for d in listed.split(",") if d.strip()])
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines())


def replica_devices(
    profile: Profile, roles: Sequence[Role], replicas: int, gpus: int | None = None
) -> tuple[dict[tuple[Role, int], str], int]:
    """``CUDA_VISIBLE_DEVICES`` of each GPU replica, and how many replicas share a device.

    Replica 0 keeps the profile's devices; replica i adds i times the number of devices the
    profile uses, so no two replicas share a device while the machine has enough (``gpu-2x``,
    2 replicas: draft 0 and 2, base 1 and 3). With fewer, the replicas take the device sets in
    turn and the second number says how many share one (each then gets that fraction of its
    ``--gpu-memory-utilization``). A profile needing more devices than the machine has is a
    :class:`ConfigError`.
    """
    own = {role: _devices(profile.draft if role == "draft" else profile.base) for role in roles}
    used = sorted({d for ds in own.values() for d in ds})
    if not used:
        raise ConfigError(
            f"profile {profile.name!r}: a GPU server without "
            "CUDA_VISIBLE_DEVICES cannot be replicated onto its own devices"
        )
    stride = max(used) + 1
    have = visible_gpus() if gpus is None else gpus
    slots = replicas if have is None else min(replicas, have // stride)
    if slots < 1:
        raise ConfigError(f"profile {profile.name!r} uses {stride} GPUs, this machine shows {have}")
    out = {
        (role, i): ",".join(str(d + (i % slots) * stride) for d in own[role])
        for role in roles
        for i in range(replicas)
    }
    return out, -(-replicas // slots)


def _devices(spec: ServerSpec) -> list[int]:
    value = dict(spec.env).get("CUDA_VISIBLE_DEVICES", "")
    try:
        return [int(d) for d in value.split(",") if d.strip()]
    except ValueError:
        raise ConfigError(f"CUDA_VISIBLE_DEVICES={value!r}: expected device numbers") from None


def _with_devices(
    env: tuple[tuple[str, str], ...], devices: str | None
) -> tuple[tuple[str, str], ...]:
    if devices is None:
        return env
    return (
        *((k, v) for k, v in env if k != "CUDA_VISIBLE_DEVICES"),
        ("CUDA_VISIBLE_DEVICES", devices),
    )


def router_executable() -> str:
    """The ``vllm-router`` command of this environment (:class:`ServeError`: how to install)."""
    here = Path(sys.executable).with_name("vllm-router")
    found = str(here) if here.is_file() else shutil.which("vllm-router")
    if found is None:
        raise ServeError(
            "--replicas needs vLLM's router: pip install "
            "'langchain-specreason[scale]' (the vllm-router package)"
        )
    return found


def router_command(router: RouterSpec) -> list[str]:
    """The command line of ``router``: ``vllm-router``'s flags, run by :mod:`.router_main`.

    No secret on it: the guard asks the replicas, and the router forwards the client's key.
    """
    guard = [VALIDATION_FLAG, *router.key_check] if router.key_check else []
    return [
        sys.executable,
        "-m",
        "langchain_specreason.serving.router_main",
        *guard,
        "--host",
        router.host,
        "--port",
        str(router.port),
        "--worker-urls",
        *router.workers,
        "--policy",
        router.policy,
        "--prometheus-host",
        "127.0.0.1",
        "--prometheus-port",
        str(router.metrics_port),
        *FAILOVER_FLAGS,
    ]
