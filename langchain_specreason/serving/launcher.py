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
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

from ..arbitrage.features import ROUTER_CONFIG
from ..endpoint import server_root
from ..errors import PortInUseError, ServeError, ServerDiedError
from .catalog import CATALOG
from .fetch import cache_root, fetch, model_dir
from .profiles import Profile, Role, ServerSpec
from .secrets import DEV_MODE_ENV, SERVER_KEY_ENV, check_exposure, redact_args

_MODEL_REF = re.compile(r"\{model:([^}]+)\}")


def resolve_model(model: str, *, fetch_missing: bool = True) -> str:
    """The ``--model`` of a server.

    Catalog names become their local folder (fetched if needed), ``router:NAME`` a trained
    router's folder; anything else is kept.
    """
    if model in CATALOG:
        return str(fetch(model) if fetch_missing else model_dir(model))
    if model.startswith("router:"):
        folder = router_dir(model.removeprefix("router:"))
        if fetch_missing and not (folder / ROUTER_CONFIG).is_file():
            raise ServeError(f"no trained router at {folder}; make one with `specreason "
                             f"arbitrage train --out {folder}` (or pass --router-model DIR)")
        return str(folder)
    return model


def router_dir(name: str) -> Path:
    """Default folder of the router trained for profile ``name``."""
    return cache_root() / "routers" / name


def expand_args(args: Iterable[str], *, fetch_missing: bool = True) -> list[str]:
    """Expand ``{model:NAME}`` references inside server arguments."""
    return [
        _MODEL_REF.sub(lambda m: resolve_model(m.group(1), fetch_missing=fetch_missing), arg)
        for arg in args
    ]


def server_command(spec: ServerSpec, device: str, *, fetch_missing: bool = True) -> list[str]:
    """The command line that starts ``spec`` (CPU: module entry point; GPU: ``vllm serve``)."""
    model = resolve_model(spec.model, fetch_missing=fetch_missing)
    common = ["--served-model-name", spec.served_name, "--host", spec.host,
              "--port", str(spec.port), *expand_args(spec.args, fetch_missing=fetch_missing)]
    if device == "cpu":
        return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
                *common]
    return ["vllm", "serve", model, *common]


def server_env(spec: ServerSpec, device: str, *, api_key: str | None = None) -> dict[str, str]:
    """Environment of a server process: ours, plus the profile's, plus offline defaults on CPU.

    ``api_key`` becomes ``VLLM_API_KEY`` (over any inherited one): vLLM requires it on ``/v1``.
    """
    env = dict(os.environ)
    if device == "cpu":
        env.setdefault("HF_HUB_OFFLINE", "1")
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        # vLLM 0.32's AOT compile cache fails to load on CPU ("no attribute
        # finalize_loading") and recompiles at every start; the inductor cache path works:
        # a warm start of the 135M model takes ~2 min instead of ~6.
        env.setdefault("VLLM_USE_AOT_COMPILE", "0")
        # A model step that recompiles on a busy 2-core machine can exceed vLLM's default
        # 300 s and kill the engine; a slow step is better than a dead server.
        env.setdefault("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "1800")
    env.update(dict(spec.env))
    if api_key:
        env[SERVER_KEY_ENV] = api_key
    return env


def check_port_free(host: str, port: int) -> None:
    """Raise :class:`PortInUseError` if ``host:port`` cannot be bound.

    SO_REUSEADDR as uvicorn sets it: connections lingering in TIME_WAIT after a server stopped
    do not count, only a socket listening there.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            raise PortInUseError(
                f"port {port} on {host} is already in use; stop what listens there or pick "
                f"another port (--draft-port / --base-port)"
            ) from None


@dataclass
class _Running:
    spec: ServerSpec
    proc: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes]


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
    ) -> None:
        self.profile = profile
        self.roles = roles
        self.log_dir = log_dir or cache_root() / "logs" / profile.name
        self.startup_timeout = startup_timeout
        self.echo = echo
        self._api_key = api_key or None
        self._warned: set[str] = set()
        self._running: list[_Running] = []

    @property
    def api_key(self) -> str | None:
        """The key the servers require when one was given (clients send the same)."""
        return self._api_key

    @property
    def urls(self) -> dict[str, str]:
        """Base URLs (ending in ``/v1``) of the started servers, by role."""
        return {r.spec.role: r.spec.url for r in self._running}

    def log_path(self, role: Role) -> Path:
        """Where the log of the ``role`` server is written."""
        return self.log_dir / f"{role}.log"

    def check_exposure(self, specs: Iterable[ServerSpec] | None = None) -> list[dict[str, str]]:
        """The environments of the servers, after refusing an unsafe one (:class:`ConfigError`).

        A dev-mode server on a non-loopback host without a key is refused; with a key it starts
        with dev mode off (vLLM's key does not guard the admin routes dev mode adds); a
        non-loopback server with a key gets a warning on stderr, once (the key guards only
        vLLM's ``/v1``).
        """
        if specs is None:
            specs = [s for s in self.profile.servers() if s.role in self.roles]
        envs = []
        for spec in specs:
            env = server_env(spec, self.profile.device, api_key=self._api_key)
            warning = check_exposure(spec.role, spec.host, env, spec.args)
            if warning and env.pop(DEV_MODE_ENV, None) is not None:
                warning += (f"; {DEV_MODE_ENV} is off for it (its admin routes would be open "
                            "to anyone: /reset_prefix_cache is not served)")
            if warning and warning not in self._warned:
                self._warned.add(warning)
                print(warning, file=sys.stderr, flush=True)
            envs.append(env)
        return envs

    def start(self) -> Launcher:
        """Start the servers and block until each answers ``/health``."""
        specs = [s for s in self.profile.servers() if s.role in self.roles]
        envs = self.check_exposure(specs)
        if self.profile.device == "gpu" and shutil.which("vllm") is None:
            raise ServeError("GPU profiles need the `vllm` command: pip install "
                             "'langchain-specreason[gpu]'")
        if self.profile.device == "cpu":
            try:
                import vllm  # noqa: F401
            except ImportError:
                raise ServeError("CPU profiles need vLLM's CPU build: pip install "
                                 "'langchain-specreason[cpu]' (or run `make venv`)") from None
        for spec in specs:
            check_port_free(spec.host, spec.port)
        commands = [server_command(s, self.profile.device) for s in specs]
        self.log_dir.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)
        try:
            for spec, cmd, env in zip(specs, commands, envs, strict=True):
                log_path = self.log_path(spec.role)
                log_file = log_path.open("wb")
                log_file.write(("$ " + " ".join(redact_args(cmd)) + "\n").encode())
                log_file.flush()
                proc = subprocess.Popen(
                    cmd, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env=env, start_new_session=True,
                )
                self._running.append(_Running(spec, proc, log_path, log_file))
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        pending = list(self._running)
        with httpx.Client(timeout=5.0) as client:
            while pending:
                for run in list(pending):
                    code = run.proc.poll()
                    if code is not None:
                        raise ServerDiedError(
                            f"{run.spec.role} server ({run.spec.served_name}) exited with code "
                            f"{code} during start-up: {_last_error(run.log_path)} "
                            f"(full log: {run.log_path})"
                        )
                    health = server_root(run.spec.url) + "/health"
                    with contextlib.suppress(httpx.HTTPError):
                        if client.get(health).status_code == 200:
                            pending.remove(run)
                            if self.echo:
                                print(f"{run.spec.role}: {run.spec.url}", flush=True)
                if pending and time.monotonic() > deadline:
                    names = ", ".join(r.spec.role for r in pending)
                    raise ServeError(
                        f"{names} server not healthy after {self.startup_timeout:.0f} s; "
                        f"see logs in {self.log_dir}"
                    )
                if pending:
                    time.sleep(1.0)

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

    def raise_if_dead(self) -> None:
        """Raise :class:`ServerDiedError` if a started server has exited."""
        for run in self._running:
            code = run.proc.poll()
            if code is not None:
                raise ServerDiedError(f"{run.spec.role} server exited with code {code}: "
                                      f"{_last_error(run.log_path)} (log: {run.log_path})")

    def pids(self) -> list[int]:
        """Process ids of the started servers (the group leaders)."""
        return [r.proc.pid for r in self._running]

    def __enter__(self) -> Launcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _last_error(log_path: Path) -> str:
    """The most telling line of a server log: the last error-looking line, else the last line."""
    try:
        lines = [ln.strip() for ln in log_path.read_text(errors="replace").splitlines()
                 if ln.strip()]
    except OSError:
        return "no log"
    for line in reversed(lines):
        if re.search(r"(Error|error:|Exception|No such file|not found)", line):
            return line[-300:]
    return lines[-1][-300:] if lines else "empty log"
