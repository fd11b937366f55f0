"""Start a profile's vLLM servers, wait until they are healthy, and stop exactly what was started.

Used by ``specreason serve``, the demo, the benchmark and the test fixtures alike::

    with Launcher(load_profile("cpu-test")) as servers:
        print(servers.urls["draft"], servers.urls["base"])

Each server runs in its own session (process group), so stopping it also stops the engine
processes vLLM forks; its output goes to ``<log_dir>/<role>.log``, after its command line
(secrets redacted).

With ``api_key``, every server requires that key (it is passed in the server's environment as
``VLLM_API_KEY``, never on its command line). A server with ``VLLM_SERVER_DEV_MODE=1`` on a
non-loopback ``host`` and no key is refused (see :mod:`.secrets`).

With ``replicas=N`` (N > 1) each role runs N servers behind one ``vllm-router`` (see
:mod:`.replicas` for the ports): ``urls`` are the routers', ``replica_urls`` the servers'.
Logs: ``<role>-<i>.log`` per replica, ``<role>-router.log`` per router.

With ``check_memory=True`` the plan's memory (:mod:`.memory`) is checked before any process
starts (:class:`~langchain_specreason.errors.MemoryPlanError`). With ``one_at_a_time=True`` each
server is started, waited for and warmed with one one-token completion before the next starts,
so no two start-ups and first-request compiles stack their memory peaks.

Cores (CPU profiles, :mod:`.cores`): a draft or base server started without the other gets
both roles' cores unless the other runs here already or ``keep_profile_cores=True``; the
binding is said on stderr at start, and checked (a core the machine lacks, a draft and a base
sharing one: :class:`~langchain_specreason.errors.ConfigError`) before anything starts.
``<log_dir>/meta.json`` records what each started server runs with (its cores, command line,
the profile's environment and overrides; secrets redacted), one entry per server label.

:meth:`Launcher.supervise` restarts a server that died (a single server, a replica or a router)
with exponential back-off, up to ``max_restarts`` times each (a count reset after a healthy
period), saying so on stderr; the others keep running. A replica past its restarts is dropped
while its role has another live replica (see :mod:`.supervision`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

from ..errors import ServeError
from . import supervision
from .catalog import CATALOG
from .commands import resolve_model, server_command, server_env
from .commands import router_dir as router_dir
from .cores import binding, check_cores
from .fetch import cache_root
from .memory import (
    MemoryPlan,
    ServerNeed,
    check_gpu_shares,
    dtype_bytes,
    flag_value,
    folder_bytes,
    gpu_share,
    host_memory,
    kv_bytes,
    replica_kv,
    speculative_model,
    weight_bytes,
)
from .processes import _Running, check_port_free, kill_group, popen, wait_healthy
from .profiles import Profile, Role, ServerSpec, bind_cores
from .replicas import (
    DEFAULT_POLICY,
    ReplicaPlan,
    guard_routers,
    plan_replicas,
    router_command,
    router_executable,
)
from .secrets import DEV_MODE_ENV, check_exposure, redact_args, redact_env, server_key


class Launcher:
    """Start both servers of a profile (or only some roles) and stop them on exit."""

    def __init__(
        self,
        profile: Profile,
        *,
        roles: tuple[Role, ...] = ("draft", "base"),
        log_dir: Path | None = None,
        startup_timeout: float = 1800.0,
        echo: bool = False,
        api_key: str | None = None,
        replicas: int = 1,
        router_policy: str = DEFAULT_POLICY,
        replica_port: int | None = None,
        replica_kv: dict[Role, int] | None = None,
        check_memory: bool = False,
        one_at_a_time: bool = False,
        max_restarts: int = 3,
        restart_backoff: float = 2.0,
        healthy_reset: float | None = None,
        keep_profile_cores: bool = False,
    ) -> None:
        self.profile, self.core_notes = bind_cores(
            profile, roles, keep_profile_cores=keep_profile_cores
        )
        """The profile with the started servers' cores (:func:`.cores.bind_cores`), and the
        lines that say a lone server's binding (printed at :meth:`start`)."""
        self.roles = roles
        self.plan: ReplicaPlan | None = None
        """The replicas and routers when ``replicas`` > 1 (checked here: ConfigError)."""
        if replicas != 1 or replica_port is not None:
            self.plan = plan_replicas(
                self.profile,
                replicas,
                roles=roles,
                policy=router_policy,
                replica_port=replica_port,
                kv_cache=replica_kv,
            )
        self.replicas = replicas
        self.check_memory = check_memory
        self.one_at_a_time = one_at_a_time
        self.max_restarts = max_restarts
        self.restart_backoff = restart_backoff
        self.healthy_reset = healthy_reset
        """Seconds of serving that reset a process's restart count (None: the default of
        :func:`.supervision.healthy_reset_after`)."""
        self.clock = time.monotonic
        """What supervision reads the healthy periods with."""
        self.memory: MemoryPlan | None = None
        """The CPU memory plan, once :meth:`memory_plan` ran."""
        self.log_dir = log_dir or cache_root() / "logs" / profile.name
        self.startup_timeout = startup_timeout
        self.echo = echo
        self._api_key = api_key or None
        self._warned: set[str] = set()
        self._running: list[_Running] = []
        self._router_key: str | None = None
        """The replicas' key, which a guarded router's ``/health`` wants too."""

    @property
    def api_key(self) -> str | None:
        """The key the servers require when one was given (clients send the same)."""
        return self._api_key

    @property
    def urls(self) -> dict[str, str]:
        """Base URLs (ending in ``/v1``) of the started servers by role (with replicas: routers)."""
        return {r.role: r.url for r in self._running if r.public}

    @property
    def replica_urls(self) -> dict[str, list[str]]:
        """Base URLs of the started replicas, by role (empty without replicas)."""
        out: dict[str, list[str]] = {}
        for run in self._running:
            if not run.public:
                out.setdefault(run.role, []).append(run.url)
        return out

    @property
    def meta_path(self) -> Path:
        """``meta.json`` of the log folder: what the started servers run with, by label."""
        return self.log_dir / "meta.json"

    def log_path(self, role: Role, replica: int | None = None) -> Path:
        """Where the log of the ``role`` server (or its replica ``replica``, from 1) goes."""
        return self.log_dir / (f"{role}.log" if replica is None else f"{role}-{replica}.log")

    def router_log_path(self, role: Role) -> Path:
        """Where the log of the ``role`` pool's ``vllm-router`` goes."""
        return self.log_dir / f"{role}-router.log"

    def check_exposure(self, specs: Iterable[ServerSpec] | None = None) -> list[dict[str, str]]:
        """The environments of the servers, after refusing an unsafe one (:class:`ConfigError`).

        A dev-mode server on a non-loopback host without a key is refused; with a key it starts
        with dev mode off (vLLM's key does not guard the admin routes dev mode adds); a
        non-loopback server with a key gets a warning on stderr, once (the key guards only
        vLLM's ``/v1``). With replicas, each router gets its key guard when the replicas
        require a key, and is refused off-host without one (:func:`.replicas.guard_routers`).
        """
        if specs is None:
            specs = self._specs()
        specs = list(specs)
        envs = []
        for spec in specs:
            env = server_env(spec, self.profile.device, api_key=self._api_key)
            warning = check_exposure(spec.role, spec.host, env, spec.args)
            if warning and env.pop(DEV_MODE_ENV, None) is not None:
                warning += (
                    f"; {DEV_MODE_ENV} is off for it (its admin routes would be open "
                    "to anyone: /reset_prefix_cache is not served)"
                )
            if warning and warning not in self._warned:
                self._warned.add(warning)
                print(warning, file=sys.stderr, flush=True)
            envs.append(env)
        if self.plan is not None:
            keys = {
                server_key(env, spec.args)
                for spec, env in zip(specs, envs, strict=True)
                if spec.role in self.plan.routers
            }
            key = next(iter(keys)) if len(keys) == 1 else None
            self.plan = guard_routers(self.plan, keyed=key is not None)
            self._router_key = key
        return envs

    def memory_plan(self, envs: list[dict[str, str]] | None = None) -> MemoryPlan | None:
        """The plan's memory against this host's (CPU), or None on GPU profiles.

        GPU profiles: the ``--gpu-memory-utilization`` shares of the servers on each device are
        checked here instead (:class:`~langchain_specreason.errors.MemoryPlanError`).
        """
        specs = self._specs()
        if envs is None:
            envs = self.check_exposure(specs)
        labels = self._labels(specs)
        if self.profile.device == "gpu":
            check_gpu_shares(
                (label, env.get("CUDA_VISIBLE_DEVICES", "0"), gpu_share(spec.args))
                for label, spec, env in zip(labels, specs, envs, strict=True)
            )
            return None
        available, total = host_memory()
        needs = []
        for label, spec, env in zip(labels, specs, envs, strict=True):
            weights = self._weights(spec.model, spec.args)
            drafter = speculative_model(spec.args)  # loaded inside this server (sd variants)
            drafter_weights = 0 if drafter is None else self._weights(drafter, spec.args)
            needs.append(
                ServerNeed(
                    label=label,
                    kv=kv_bytes(
                        env, spec.args, total, weights=(weights or 0) + (drafter_weights or 0)
                    ),
                    weights=weights,
                    drafter=drafter_weights,
                )
            )
        routers = 0 if self.plan is None else len(self.plan.routers)
        self.memory = MemoryPlan(tuple(needs), available=available, routers=routers)
        return self.memory

    @staticmethod
    def _weights(model: str, args: tuple[str, ...]) -> int | None:
        """Resident weight bytes of ``model`` served with ``args`` (None: size not known)."""
        folder, config = model_facts(model)
        served, disk = dtype_bytes(args, config)
        return None if folder is None else weight_bytes(folder, served, disk)

    def _labels(self, specs: list[ServerSpec]) -> list[str]:
        """How messages name each of ``specs`` (``draft``, ``base replica 2``)."""
        numbers: dict[str, int] = {}
        out = []
        for spec in specs:
            if self.plan is not None and spec.role != "router":
                numbers[spec.role] = numbers.get(spec.role, 0) + 1
                out.append(f"{spec.role} replica {numbers[spec.role]}")
            else:
                out.append(spec.role)
        return out

    def _specs(self) -> list[ServerSpec]:
        """The servers to start: the profile's of ``roles``, or the plan's replicas."""
        if self.plan is None:
            return [s for s in self.profile.servers() if s.role in self.roles]
        extra = [s for s in self.profile.servers() if s.role == "router" and s.role in self.roles]
        return [*self.plan.servers(), *extra]

    def start(self) -> Launcher:
        """Start the servers and block until each answers ``/health`` (then the routers)."""
        specs = self._specs()
        envs = self.check_exposure(specs)
        if self.profile.device == "cpu":
            check_cores(
                (label, spec.role, binding(env))
                for label, spec, env in zip(self._labels(specs), specs, envs, strict=True)
            )
        ports = (
            [(s.host, s.port) for s in specs]
            if self.plan is None
            else self.plan.ports() + [(s.host, s.port) for s in specs]
        )
        for host, port in dict.fromkeys(ports):
            check_port_free(host, port)
        # a taken port first (the most specific), then the memory plan, then the install
        if self.check_memory:
            plan = self.memory_plan(envs)
            if plan is not None:
                plan.check(replicas=self.replicas)
        if self.profile.device == "gpu" and shutil.which("vllm") is None:
            raise ServeError(
                "GPU profiles need the `vllm` command: pip install 'langchain-specreason[gpu]'"
            )
        if self.profile.device == "cpu":
            try:
                import vllm  # noqa: F401
            except ImportError:
                raise ServeError(
                    "CPU profiles need vLLM's CPU build: pip install "
                    "'langchain-specreason[cpu]' (or run `make venv`)"
                ) from None
        commands = [server_command(s, self.profile.device) for s in specs]
        if self.plan is not None:
            router_executable()  # ServeError when vllm-router is not installed
        routers = (
            []
            if self.plan is None
            else [(r, router_command(r)) for r in self.plan.routers.values()]
        )
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for note in self.core_notes:
            print(note, file=sys.stderr, flush=True)
        self.write_meta(specs, commands)
        atexit.register(self.stop)
        try:
            for spec, cmd, env, label in zip(
                specs, commands, envs, self._labels(specs), strict=True
            ):
                replica = self.plan is not None and spec.role != "router"
                number = int(label.rsplit(" ", 1)[1]) if replica else None
                self._spawn(
                    cmd,
                    env,
                    self.log_path(spec.role, number),
                    role=spec.role,
                    url=spec.url,
                    what=spec.served_name,
                    public=not replica,
                    label=label,
                    warm=spec.served_name if spec.role != "router" else None,
                )
                if self.one_at_a_time:
                    self._wait_healthy(self._running[-1:])
                    self._warm(self._running[-1])
            if self.plan is None:
                if not self.one_at_a_time:
                    self._wait_healthy()
                return self
            if not self.one_at_a_time:
                self._wait_healthy(list(self._running))
            started = len(self._running)
            for router, cmd in routers:
                self._spawn(
                    cmd,
                    dict(os.environ),
                    self.router_log_path(router.role),
                    role=router.role,
                    url=router.url,
                    what="vllm-router",
                    label=f"{router.role} router",
                )
            self._wait_healthy(self._running[started:])
        except BaseException:
            self.stop()
            raise
        return self

    def write_meta(self, specs: list[ServerSpec], commands: list[list[str]]) -> None:
        """Record each server of ``specs`` in :attr:`meta_path`, over its label's last entry.

        Entries of servers started by another launcher with the same log folder are kept.
        """
        record: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(self.meta_path.read_text())
        servers: dict[str, Any] = {}
        if isinstance(record, dict) and isinstance(record.get("servers"), dict):
            servers = record["servers"]
        else:
            record = {}
        now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        for label, spec, cmd in zip(self._labels(specs), specs, commands, strict=True):
            servers[label] = {
                "started_at": now,
                "profile": self.profile.name,
                "variant": self.profile.variant,
                "role": spec.role,
                "url": spec.url,
                "model": spec.model,
                "cores": binding(spec.env),
                "command": redact_args(cmd),
                "env": redact_env(dict(spec.env)),
            }
        record["servers"] = servers
        self.meta_path.write_text(json.dumps(record, indent=2) + "\n")

    def _spawn(
        self,
        cmd: list[str],
        env: dict[str, str],
        log_path: Path,
        *,
        role: Role,
        url: str,
        what: str,
        public: bool = True,
        label: str = "",
        warm: str | None = None,
    ) -> None:
        log_file = log_path.open("wb")
        log_file.write(("$ " + " ".join(redact_args(cmd)) + "\n").encode())
        log_file.flush()
        proc = popen(cmd, env, log_file)
        self._running.append(
            _Running(
                role, url, what, proc, log_path, log_file, public, label, tuple(cmd), env, 0, warm
            )
        )

    def _warm(self, run: _Running) -> None:
        """One one-token completion, so the first request's compile happens now, alone."""
        if run.warm is None:
            return
        key = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        body = {"model": run.warm, "prompt": "Hello", "max_tokens": 1}
        try:
            httpx.post(
                run.url + "/completions", json=body, headers=key, timeout=self.startup_timeout
            ).raise_for_status()
        except httpx.HTTPError as exc:
            raise ServeError(
                f"{run.label} server did not answer its warm-up completion: {exc} "
                f"(log: {run.log_path})"
            ) from None

    def supervise(self) -> None:
        """Restart every started process that has exited; the others keep running.

        Each restart is said on stderr, and waits until the process is healthy again (a
        generating server is warmed too). A start that fails is retried with exponential
        back-off (``restart_backoff`` s, doubling, at most 60 s). A process's restart count is
        reset once it has served ``healthy_reset`` s. A process that has been restarted
        ``max_restarts`` times and exits again is dropped if it is a replica whose role has
        another live replica, else a :class:`ServerDiedError` (:mod:`.supervision`).
        """
        supervision.supervise(
            self._running,
            self._respawn,
            max_restarts=self.max_restarts,
            restart_backoff=self.restart_backoff,
            healthy_reset=self.healthy_reset,
            clock=self.clock,
        )

    def _respawn(self, run: _Running) -> None:
        """Start ``run``'s process again (its log goes on) and wait until it is healthy."""
        kill_group(run)
        run.restarts += 1
        print(
            f"restarting {run.label} (restart {run.restarts} of at most {self.max_restarts})",
            file=sys.stderr,
            flush=True,
        )
        run.log_file.write(f"\n--- restart {run.restarts} ---\n".encode())
        run.log_file.flush()
        run.proc = popen(run.cmd, run.env or dict(os.environ), run.log_file)
        self._wait_healthy([run])
        self._warm(run)

    def _wait_healthy(self, runs: list[_Running] | None = None) -> None:
        wait_healthy(
            self._running if runs is None else runs,
            startup_timeout=self.startup_timeout,
            router_key=self._router_key,
            echo=self.echo,
            log_dir=self.log_dir,
        )

    def stop(self) -> None:
        """Stop every process this launcher started (SIGTERM, then SIGKILL), idempotently."""
        for run in self._running:
            if run.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(run.proc.pid, signal.SIGTERM)
        for run in self._running:
            try:
                run.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(run.proc.pid, signal.SIGKILL)
                run.proc.wait(timeout=30)
            # vLLM's engine core is in the same process group; make sure none outlives it.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(run.proc.pid, signal.SIGKILL)
            run.log_file.close()
        self._running.clear()
        atexit.unregister(self.stop)

    def pids(self) -> list[int]:
        """Process ids of the started servers (the group leaders)."""
        return [r.proc.pid for r in self._running]

    def __enter__(self) -> Launcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def model_facts(model: str) -> tuple[int | None, dict[str, Any] | None]:
    """``(folder bytes, config.json)`` of a server's model as far as known without fetching.

    A fetched or local folder is measured; a catalog model not fetched yet has its catalog
    size (and no config); a Hugging Face id is unknown: ``(None, None)``.
    """
    import json

    folder = Path(resolve_model(model, fetch_missing=False))
    if folder.is_dir():
        config = None
        with contextlib.suppress(OSError, ValueError):
            config = json.loads((folder / "config.json").read_text())
        return folder_bytes(folder), config
    if model in CATALOG:
        return CATALOG[model].folder_mb * 10**6, None
    return None, None


def default_replica_kv(profile: Profile, roles: Iterable[Role]) -> dict[Role, int]:
    """KV cache per CPU replica of each role (:func:`.memory.replica_kv`; {} on GPU)."""
    if profile.device != "cpu":
        return {}
    out: dict[Role, int] = {}
    for role in roles:
        if role not in ("draft", "base"):
            continue
        spec = profile.draft if role == "draft" else profile.base
        _, config = model_facts(spec.model)
        served, _ = dtype_bytes(spec.args, config)
        length = flag_value(spec.args, "--max-model-len")
        out[role] = replica_kv(config, int(length) if length else None, served)
    return out
