"""Declarative serve profiles: which two vLLM servers to start, with which flags.

A profile is a TOML file in ``serve/profiles/`` (shipped inside the wheel as package data)::

    description = "..."
    device = "cpu"            # cpu: the api_server module entry point; gpu: `vllm serve`
    family = "instruct"       # prompt family of the pair (see langchain_specreason.formats)

    [draft]                   # and [base]
    model = "smollm2-135m"    # a catalog name (fetched locally), a folder, or a Hugging Face id
    served_name = "smollm2-135m"
    port = 8101
    args = ["--max-model-len", "4096", ...]
    env = { VLLM_CPU_KVCACHE_SPACE = "1" }
    cores = "0"               # CPU: the cores its vLLM threads run on (VLLM_CPU_OMP_THREADS_BIND)

    [variants.sd.base]        # `--variant sd` appends these args to the base server
    args = ["--speculative-config", '{"method":"draft_model","model":"{model:qwen2.5-coder-0.5b}"}']

``{model:NAME}`` inside an argument expands to the fetched folder of catalog model NAME.

Cores (CPU profiles): each server's ``cores`` (``"0"``, ``"0-1"``, ``"0,2-3"``) becomes its
``VLLM_CPU_OMP_THREADS_BIND`` (say it once: not both). The draft and the base get cores of their
own when both run; **a draft or base server started alone gets both roles' cores** (``--only
base``: the base on the draft's core too) unless the other role's server runs here already (its
port listens) or ``--keep-profile-cores`` is given; the router keeps its own (the draft's).
A binding set with ``--draft-env``/``--base-env VLLM_CPU_OMP_THREADS_BIND=...`` is used as
given. A core the machine does not have, or a draft and a base sharing one, is refused before
anything starts (:mod:`.cores`).

An optional ``[router]`` section describes the Arbitrage router server (a classifier served
with ``--runner pooling``); it starts only when asked for (``specreason serve --with-router``,
or a benchmark with the ``arbitrage`` mode). Its model ``router:NAME`` is the folder that
``specreason arbitrage train`` writes by default (``<cache>/routers/NAME``).

API keys are not part of a profile (its args and env are recorded in ``meta.json``): give one
to the launcher (``specreason serve --api-key``, or ``VLLM_API_KEY`` in the environment), which
hands it to every server of every profile through the server's environment.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from ..errors import ConfigError, ServeError
from .cores import BIND_ENV, describe_cores, format_cores, listening, machine_cores, parse_cores
from .secrets import redact_args, redact_env

Role = Literal["draft", "base", "router"]


@dataclass(frozen=True)
class ServerSpec:
    """One vLLM server of a profile."""

    role: Role
    model: str
    """Catalog name, local folder or Hugging Face id."""
    served_name: str
    """The model name clients send (``--served-model-name``)."""
    port: int
    host: str = "127.0.0.1"
    args: tuple[str, ...] = ()
    """Extra vLLM flags (same as ``vllm serve``)."""
    env: tuple[tuple[str, str], ...] = ()
    """Extra environment variables for the server process."""
    cores: str | None = None
    """CPU cores the profile gives the server (also its ``VLLM_CPU_OMP_THREADS_BIND``), as
    ``0-1``; None: not declared, or the binding was set by hand."""

    def __repr__(self) -> str:  # secrets in args or env never show in a traceback or a log
        return (
            f"ServerSpec(role={self.role!r}, model={self.model!r}, "
            f"served_name={self.served_name!r}, port={self.port!r}, host={self.host!r}, "
            f"args={tuple(redact_args(self.args))!r}, "
            f"env={tuple(redact_env(dict(self.env)).items())!r}, cores={self.cores!r})"
        )

    @property
    def url(self) -> str:
        """OpenAI-compatible base URL, ending in ``/v1``."""
        return f"{root_url(self.host, self.port)}/v1"


def root_url(host: str, port: int) -> str:
    """The root URL (no ``/v1``) of a server listening on ``host``, as a client here reaches it.

    A listen address of every interface (``0.0.0.0``, empty) is reached on loopback.
    """
    return f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}"


@dataclass(frozen=True)
class Profile:
    """A draft server and a base server that run together."""

    name: str
    description: str
    device: Literal["cpu", "gpu"]
    family: str
    draft: ServerSpec
    base: ServerSpec
    variant: str | None = None
    variants: tuple[str, ...] = field(default=(), compare=False)
    router: ServerSpec | None = None
    """The Arbitrage router server, when the profile has one."""

    def servers(self) -> tuple[ServerSpec, ...]:
        """Every server of the profile: draft, base, then the router if any."""
        return (self.draft, self.base) + ((self.router,) if self.router else ())


def profiles_dir() -> Path:
    """The folder holding the profile TOML files (wheel package data, else the repo's serve/)."""
    packaged = Path(__file__).with_name("profiles")
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "serve" / "profiles"


def list_profiles() -> list[str]:
    """Names of the available profiles."""
    return sorted(p.stem for p in profiles_dir().glob("*.toml"))


def load_profile(
    name: str,
    *,
    variant: str | None = None,
    draft_model: str | None = None,
    base_model: str | None = None,
    draft_port: int | None = None,
    base_port: int | None = None,
    host: str | None = None,
    extra_args: dict[str, list[str]] | None = None,
    router_model: str | None = None,
    router_port: int | None = None,
    extra_env: dict[str, dict[str, str]] | None = None,
) -> Profile:
    """Load profile ``name`` (a profile name or a path to a TOML file) with overrides applied.

    ``extra_args`` appends vLLM flags per role; ``extra_env`` sets environment variables per
    role over the profile's (e.g. a smaller ``VLLM_CPU_KVCACHE_SPACE`` for replicas).
    """
    path = Path(name)
    if path.suffix != ".toml":
        path = profiles_dir() / f"{name}.toml"
    if not path.is_file():
        raise ServeError(f"unknown profile {name!r}; known profiles: {', '.join(list_profiles())}")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"profile {path} is not valid TOML: {exc}") from None
    variants = data.get("variants", {})
    if variant is not None and variant not in variants:
        known = ", ".join(variants) or "none"
        raise ServeError(f"profile {path.stem!r} has no variant {variant!r}; variants: {known}")
    device = data.get("device", "cpu")
    if device not in ("cpu", "gpu"):
        raise ConfigError(f"profile {path.stem!r}: device must be 'cpu' or 'gpu', not {device!r}")
    servers = {}
    roles: tuple[Role, Role] = ("draft", "base")
    for role in roles:
        section = data.get(role)
        if not isinstance(section, dict) or "model" not in section or "port" not in section:
            raise ConfigError(f"profile {path.stem!r}: [{role}] needs at least model and port")
        args = list(section.get("args", []))
        if variant is not None:
            args += list(variants[variant].get(role, {}).get("args", []))
        env, cores = _env_and_cores(path.stem, role, device, section)
        spec = ServerSpec(
            role=role,
            model=str(section["model"]),
            served_name=str(section.get("served_name", section["model"])),
            port=int(section["port"]),
            host=section.get("host", "127.0.0.1"),
            args=tuple(str(a) for a in args),
            env=env,
            cores=cores,
        )
        servers[role] = spec
    overrides: dict[str, dict[str, object]] = {"draft": {}, "base": {}}
    if draft_model:
        overrides["draft"].update(model=draft_model, served_name=Path(draft_model).name)
    if base_model:
        overrides["base"].update(model=base_model, served_name=Path(base_model).name)
    if draft_port:
        overrides["draft"]["port"] = draft_port
    if base_port:
        overrides["base"]["port"] = base_port
    for role in ("draft", "base"):
        if host:
            overrides[role]["host"] = host
        if extra_args and extra_args.get(role):
            overrides[role]["args"] = servers[role].args + tuple(extra_args[role])
        if extra_env and extra_env.get(role):
            overrides[role]["env"] = tuple({**dict(servers[role].env), **extra_env[role]}.items())
            if BIND_ENV in extra_env[role]:  # bound by hand: the user's, not the profile's
                overrides[role]["cores"] = None
        servers[role] = replace(servers[role], **overrides[role])  # type: ignore[arg-type]
    if (
        servers["draft"].port == servers["base"].port
        and servers["draft"].host == servers["base"].host
    ):
        raise ConfigError(f"draft and base servers cannot share port {servers['base'].port}")
    router = None
    section = data.get("router")
    if section is not None:
        if not isinstance(section, dict) or "model" not in section or "port" not in section:
            raise ConfigError(f"profile {path.stem!r}: [router] needs at least model and port")
        env, cores = _env_and_cores(path.stem, "router", device, section)
        router = ServerSpec(
            role="router",
            model=router_model or str(section["model"]),
            served_name=str(section.get("served_name", "router")),
            port=router_port or int(section["port"]),
            host=host or section.get("host", "127.0.0.1"),
            args=tuple(str(a) for a in section.get("args", [])),
            env=env,
            cores=cores,
        )
        if router.port in (servers["draft"].port, servers["base"].port):
            raise ConfigError(f"the router cannot share port {router.port} with another server")
    elif router_model or router_port:
        raise ConfigError(f"profile {path.stem!r} has no [router] section")
    return Profile(
        name=path.stem,
        description=data.get("description", ""),
        device=device,
        family=data.get("family", "instruct"),
        draft=servers["draft"],
        base=servers["base"],
        variant=variant,
        variants=tuple(variants),
        router=router,
    )


def _env_and_cores(
    profile: str, role: str, device: str, section: dict[str, object]
) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """A server section's environment, with its ``cores`` as ``VLLM_CPU_OMP_THREADS_BIND``."""
    raw_env = section.get("env", {})
    env = {str(k): str(v) for k, v in (raw_env.items() if isinstance(raw_env, dict) else ())}
    if "cores" not in section:
        return tuple(env.items()), None
    if device != "cpu":
        raise ConfigError(f"profile {profile!r}: [{role}] cores is for CPU profiles")
    if BIND_ENV in env:
        raise ConfigError(
            f"profile {profile!r}: [{role}] gives its cores twice (cores and {BIND_ENV})"
        )
    what = f"profile {profile!r}: [{role}] cores"
    if "|" in str(section["cores"]):
        raise ConfigError(f"{what} is one list (no '|')")
    cores = format_cores(parse_cores(str(section["cores"]), what=what))
    return (*env.items(), (BIND_ENV, cores)), cores


def _running(spec: ServerSpec) -> bool:
    return listening(spec.host, spec.port)


def bind_cores(
    profile: Profile,
    roles: Sequence[Role],
    *,
    keep_profile_cores: bool = False,
    running: Callable[[ServerSpec], bool] = _running,
) -> tuple[Profile, list[str]]:
    """The profile with the cores of the servers of ``roles``, and the lines that say so.

    The rule (CPU profiles whose draft and base both declare ``cores``): a draft or base server
    started without the other gets both roles' cores, unless ``keep_profile_cores`` or the
    other role's server runs already (``running(spec)``; default: something listens on its
    port here, so its cores are taken). Both roles, the router alone, a GPU profile: as
    declared.
    """
    started = [r for r in ("draft", "base") if r in roles]
    if profile.device != "cpu" or len(started) != 1:
        return profile, []
    role: Role = "draft" if started[0] == "draft" else "base"
    other: Role = "base" if role == "draft" else "draft"
    spec, peer = getattr(profile, role), getattr(profile, other)
    if spec.cores is None or peer.cores is None:
        return profile, []
    own, free = parse_cores(spec.cores), parse_cores(peer.cores)
    if keep_profile_cores:
        return profile, [
            f"cores: {role} on the profile's {describe_cores(own)} (--keep-profile-cores)"
        ]
    if running(peer):
        return profile, [
            f"cores: {role} on the profile's {describe_cores(own)}: the {other} server's port "
            f"{peer.port} is in use, so its {describe_cores(free)} is not free"
        ]
    union = own | free
    if union == own:
        return profile, []
    whole = ", the whole machine" if union == machine_cores() else ""
    widened = replace(
        spec,
        cores=format_cores(union),
        env=tuple({**dict(spec.env), BIND_ENV: format_cores(union)}.items()),
    )
    note = (
        f"cores: {role} on {describe_cores(union)}{whole} (its own {format_cores(own)} and the "
        f"{other} server's {format_cores(free)}: nothing listens on its port {peer.port}); "
        f"--keep-profile-cores keeps {describe_cores(own)}"
    )
    return replace(profile, **{role: widened}), [note]
