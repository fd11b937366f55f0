"""The servers a group of runs talks to: started from a profile, or given as URLs.

Runs needing token-level speculative decoding (``sd``, ``specreason+sd``) need a base server
started with the profile's speculative variant, so with a profile the benchmark starts and
stops a :class:`~..serving.launcher.Launcher` per variant. With URLs, the caller names the
speculative base server (``--sd-base-url``).

A group of runs that needs no draft server (``bench load``'s ``base`` and ``sd`` blocks) asks
for the base alone (``roles=("base",)``): then :attr:`ServerPair.draft_url` is absent, and on
the CPU profiles the lone base gets the draft's cores too unless ``keep_profile_cores``
(:func:`~..serving.profiles.bind_cores`). The pair keeps the launcher's profile, the servers'
cores as bound, so ``meta.json`` and :attr:`ServerPair.cores` say what they ran on.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...arbitrage.features import ROUTER_CONFIG
from ...endpoint import OpenAIEndpoint
from ...errors import ConfigError, EndpointError
from ...serving.cores import binding
from ...serving.launcher import Launcher
from ...serving.profiles import Profile, Role, load_profile
from ...serving.secrets import CLIENT_KEY_ENVS, client_api_key, redact_args, redact_env


def add_api_key_flag(group: Any) -> None:
    """``--api-key`` of the clients (``bench``, ``bench judges``, ``arbitrage label``)."""
    group.add_argument(
        "--api-key",
        metavar="KEY",
        default=None,
        help="key the clients send, and the key of the servers the command "
        f"starts (default: ${CLIENT_KEY_ENVS[0]}, then "
        f"${CLIENT_KEY_ENVS[1]}; prefer them: a flag shows in `ps`)",
    )


def add_server_flags(group: Any, *, sd: bool = False) -> None:
    """The server flags the tools share, declared once.

    ``--profile``, ``--draft-url``, ``--base-url`` (``--sd-base-url`` with ``sd``),
    ``--api-key`` and ``--family``.
    """
    group.add_argument(
        "--profile", default="cpu", help="serve profile whose servers are started (default: cpu)"
    )
    group.add_argument("--draft-url", help="use this running draft server instead")
    group.add_argument("--base-url", help="use this running base server instead")
    if sd:
        group.add_argument(
            "--sd-base-url",
            help="with --draft-url/--base-url: a running base server with speculative "
            "decoding (modes sd and specreason+sd)",
        )
    add_api_key_flag(group)
    group.add_argument("--family", help="prompt family (default: the profile's)")


def api_key_of(args: Any) -> str | None:
    """The clients' key of parsed flags: ``--api-key``, else the environment's."""
    return client_api_key(getattr(args, "api_key", None))


@dataclass(frozen=True)
class ServerPair:
    """A draft and a base server (or the base alone), and their profile when started here."""

    variant: str | None
    draft: str | None
    """The draft server's URL; ``None``: not started (a block that needs only the base)."""
    base_url: str
    profile: Profile | None = field(default=None, compare=False)
    """The profile the servers run with, cores as bound (the launcher's: :attr:`cores`)."""
    router_url: str | None = None
    """The Arbitrage router server, when a run needs it."""
    router_model: str | None = None
    """Or a router folder run in-process (no server)."""
    api_key: str | None = field(default=None, repr=False, compare=False)
    """The key the clients send (the key of the servers when the benchmark started them)."""

    @property
    def draft_url(self) -> str:
        """The draft server's URL; absent (AttributeError) when no draft server was started."""
        if self.draft is None:
            raise AttributeError(
                f"no draft server in the {self.variant or 'plain'} block: only the base started"
            )
        return self.draft

    @property
    def roles(self) -> tuple[Role, ...]:
        """The roles served: ``("draft", "base")``, or ``("base",)`` alone."""
        return ("draft", "base") if self.draft is not None else ("base",)

    @property
    def urls(self) -> dict[str, str]:
        """The URL of each served role (no ``draft`` key when the base runs alone)."""
        out = {"draft": self.draft} if self.draft is not None else {}
        return {**out, "base": self.base_url}

    @property
    def cores(self) -> dict[str, str | None]:
        """The cores each served role runs on (``0-1``), as its launcher bound them.

        ``None``: not known (servers given by URL) or not bound (a GPU profile, ``auto``).
        """
        if self.profile is None:
            return {role: None for role in self.roles}
        return {role: binding(getattr(self.profile, role).env) for role in self.roles}

    async def describe(self) -> dict[str, Any]:
        """URLs, served models and (when known) the servers' flags, for ``meta.json``."""
        out: dict[str, Any] = {"variant": self.variant, "started_by_bench": bool(self.profile)}
        cores = self.cores
        for role, url in self.urls.items():
            info: dict[str, Any] = {
                "url": url,
                "models": await served_models(url, api_key=self.api_key),
            }
            if self.profile is not None:
                spec = self.profile.draft if role == "draft" else self.profile.base
                info.update(
                    model=spec.model,
                    args=redact_args(spec.args),
                    env=redact_env(dict(spec.env)),
                    cores=cores[role],
                )
            out[role] = info
        if self.draft is None:
            out["draft"] = None  # not started: the block's modes need only the base
        if self.router_model:
            out["router"] = {"in_process": self.router_model}
        if self.router_url:
            out["router"] = {
                "url": self.router_url,
                "models": await served_models(self.router_url, api_key=self.api_key),
            }
            if self.profile is not None and self.profile.router is not None:
                out["router"].update(
                    model=self.profile.router.model, args=redact_args(self.profile.router.args)
                )
        out["api_key"] = self.api_key is not None
        if self.profile is not None:
            out["profile"] = self.profile.name
        return out


@dataclass(frozen=True)
class ServerSource:
    """Where the servers come from: a profile to launch, or running servers' URLs."""

    profile: str
    draft_url: str | None = None
    base_url: str | None = None
    sd_base_url: str | None = None
    router_url: str | None = None
    router_model: str | None = None
    api_key: str | None = field(default=None, repr=False, compare=False)
    """Key of the clients, and of the servers this source starts (``None``: none)."""

    def __post_init__(self) -> None:
        if self.router_url and self.router_model:
            raise ConfigError("give --router-url or --router-model, not both")
        if bool(self.draft_url) != bool(self.base_url):
            raise ConfigError(
                "give both --draft-url and --base-url, or neither "
                "(then the profile's servers are started)"
            )
        if self.sd_base_url and not self.draft_url:
            raise ConfigError("--sd-base-url goes with --draft-url and --base-url")

    @property
    def explicit(self) -> bool:
        """True when running servers are given by URL."""
        return bool(self.draft_url)

    def check(self, variants: list[str | None], *, router: bool = False) -> None:
        """Fail before any work when a needed variant (or the router) cannot be served."""
        if self.router_model and not (Path(self.router_model) / ROUTER_CONFIG).is_file():
            raise ConfigError(
                f"--router-model {self.router_model}: no router.json there; "
                "make one with `specreason arbitrage train`"
            )
        if router and not self.router_url and not self.router_model:
            if self.explicit:
                raise ConfigError(
                    "mode arbitrage needs the router: give --router-url (a "
                    "classifier served with --runner pooling)"
                )
            if load_profile(self.profile).router is None:
                raise ConfigError(
                    f"profile {self.profile!r} has no [router] server; give --router-url"
                )
        for variant in variants:
            if variant is None:
                continue
            if self.explicit and not self.sd_base_url:
                raise ConfigError(
                    f"modes sd and specreason+sd need a base server with speculative decoding "
                    f"({variant}): give --sd-base-url, or drop --draft-url/--base-url to let "
                    "the benchmark start the profile's servers"
                )
            if not self.explicit:
                load_profile(self.profile, variant=variant)  # raises for an unknown variant

    @contextlib.contextmanager
    def servers(
        self,
        variant: str | None,
        *,
        router: bool = False,
        roles: Sequence[Role] = ("draft", "base"),
        keep_profile_cores: bool = False,
    ) -> Iterator[ServerPair]:
        """The servers of ``variant`` for the duration of the block (started and stopped).

        ``roles``: ``("draft", "base")`` (the default), or ``("base",)`` for a block that needs
        no draft (then the pair has no draft URL, and a started lone base takes the draft's
        cores too on the CPU profiles unless ``keep_profile_cores``). With ``router``, the
        router server too (unless given by URL).
        """
        if "base" not in roles or set(roles) - {"draft", "base"}:
            raise ConfigError(f"a server block is the draft and the base, or the base: {roles}")
        draft = "draft" in roles
        if self.explicit:
            assert self.draft_url and self.base_url
            base = self.sd_base_url if variant is not None else self.base_url
            assert base is not None
            yield ServerPair(
                variant,
                self.draft_url if draft else None,
                base,
                router_url=self.router_url,
                router_model=self.router_model,
                api_key=self.api_key,
            )
            return
        profile = load_profile(self.profile, variant=variant)
        own_router = router and not self.router_url and not self.router_model
        started: tuple[Role, ...] = ("draft", "base") if draft else ("base",)
        if own_router:
            started += ("router",)
        launcher = Launcher(
            profile, roles=started, api_key=self.api_key, keep_profile_cores=keep_profile_cores
        )
        announce_start(
            f"bench: starting the {profile.name}{'/' + variant if variant else ''} "
            f"{'servers' if draft else 'base server alone'}",
            launcher,
        )
        with launcher:
            router_url = launcher.urls.get("router") if own_router else self.router_url
            yield ServerPair(
                variant,
                launcher.urls["draft"] if draft else None,
                launcher.urls["base"],
                launcher.profile,
                router_url=router_url,
                router_model=self.router_model,
                api_key=launcher.api_key,
            )


async def reset_prefix_cache(
    url: str, *, timeout: float = 60.0, api_key: str | None = None
) -> bool | None:
    """Empty a vLLM server's prefix cache: ``True`` done, ``False`` refused, ``None`` no server.

    The benchmark empties both caches before each problem, so no run profits from prefixes an
    earlier run of the same problem left behind (see
    :meth:`~langchain_specreason.endpoint.OpenAIEndpoint.reset_prefix_cache`).
    """
    server = OpenAIEndpoint(url, name="server", timeout=timeout, max_retries=0, api_key=api_key)
    return await server.reset_prefix_cache()


async def served_models(
    url: str, *, timeout: float = 10.0, api_key: str | None = None
) -> list[dict[str, Any]]:
    """What ``GET /v1/models`` lists (id, root, max_model_len); ``[{"error": ...}]`` if down."""
    server = OpenAIEndpoint(url, name="server", timeout=timeout, max_retries=0, api_key=api_key)
    try:
        models = await server.models()
    except EndpointError as exc:
        return [{"error": str(exc)[:200]}]
    return [{k: m.get(k) for k in ("id", "root", "max_model_len")} for m in models]


async def served_router_folder(
    router: OpenAIEndpoint, *, api_key: str | None = None
) -> Path | None:
    """The folder a router server serves, when it holds the router's ``router.json``."""
    roots = [m.get("root") for m in await served_models(router.base_url, api_key=api_key)]
    return next((Path(r) for r in roots if r and (Path(r) / ROUTER_CONFIG).is_file()), None)


def announce_start(what: str, launcher: Launcher) -> None:
    """Say on stderr which servers start, and the folder of their logs."""
    print(f"{what} (logs: {launcher.log_dir})", file=sys.stderr, flush=True)
