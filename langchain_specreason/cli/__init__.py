"""The ``specreason`` command: fetch models, serve a profile, run the demo, bench, arbitrage.

Errors the user can fix print one line (``error: ...``) and exit with status 2; Ctrl-C exits
with 130 after stopping every server this command started.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, MissingExtraError, SpecReasonError
from ..serving.catalog import CATALOG
from .extras import missing_extra

if TYPE_CHECKING:
    from ..serving.launcher import Launcher


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``specreason``."""
    parser = argparse.ArgumentParser(prog="specreason", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    models = sub.add_parser("models", help="fetch and list the pinned models")
    msub = models.add_subparsers(dest="models_command", required=True)
    fetch_p = msub.add_parser("fetch", help="download, verify and convert models")
    fetch_p.add_argument("names", nargs="*", help=f"models (default: all): {', '.join(CATALOG)}")
    fetch_p.add_argument("--quiet", action="store_true")
    msub.add_parser("list", help="list the catalog and what is fetched")

    serve = sub.add_parser("serve", help="start a profile's draft and base vLLM servers")
    serve.add_argument("--profile", help="profile name or TOML path (required unless --list)")
    serve.add_argument(
        "--variant", help="profile variant (e.g. sd, sd-dyn, ngram, eagle3; see serve/README.md)"
    )
    serve.add_argument("--only", choices=["draft", "base", "router"], help="start one server only")
    serve.add_argument(
        "--keep-profile-cores",
        action="store_true",
        help="CPU: a server started alone keeps its profile's cores (default: it also gets the "
        "other role's when nothing listens on that role's port; serve/README.md, Cores)",
    )
    serve.add_argument(
        "--with-router",
        action="store_true",
        help="also start the profile's Arbitrage router server",
    )
    serve.add_argument("--router-model", help="router folder (default: the profile's)")
    serve.add_argument("--router-port", type=int)
    serve.add_argument("--draft-model", help="override the draft model (catalog name, folder, id)")
    serve.add_argument("--base-model", help="override the base model")
    serve.add_argument("--draft-port", type=int)
    serve.add_argument("--base-port", type=int)
    serve.add_argument(
        "--host",
        help="listen address (0.0.0.0 for multi-node; with the CPU "
        "profiles' dev mode, only with an API key)",
    )
    serve.add_argument(
        "--api-key",
        metavar="KEY",
        help="require this key on every server's /v1 routes (default: "
        "$VLLM_API_KEY; prefer the variable: a flag shows in `ps`)",
    )
    serve.add_argument(
        "--draft-arg",
        action="append",
        default=[],
        help="extra vLLM flag for the draft server (repeatable)",
    )
    serve.add_argument(
        "--base-arg",
        action="append",
        default=[],
        help="extra vLLM flag for the base server (repeatable)",
    )
    serve.add_argument(
        "--draft-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="environment variable for the draft server(s), over the "
        "profile's (repeatable; KEY= unsets KEY)",
    )
    serve.add_argument(
        "--base-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="environment variable for the base server(s) (repeatable)",
    )
    serve.add_argument(
        "--replicas",
        type=int,
        default=1,
        metavar="N",
        help="N servers per role behind one vllm-router per role (default 1: "
        "no router); needs the `scale` extra",
    )
    serve.add_argument(
        "--router-policy",
        default=None,
        metavar="POLICY",
        help="vllm-router policy with --replicas: consistent_hash (default: "
        "a run's calls, one X-Session-ID, on one replica), cache_aware, "
        "power_of_two, round_robin, random",
    )
    serve.add_argument(
        "--replica-port",
        type=int,
        metavar="PORT",
        help="first port of the replicas (default: draft port + 100; see "
        "serve/README.md for the layout)",
    )
    serve.add_argument(
        "--ignore-memory-plan",
        action="store_true",
        help="start even when the memory plan says the servers do not fit "
        "(see serve/README.md, Memory)",
    )
    serve.add_argument(
        "--max-restarts",
        type=int,
        default=3,
        metavar="N",
        help="restart a server that exits up to N times, the others serving on; the count "
        "is reset after N minutes of serving; a replica past it is dropped while its role "
        "has another (default 3; 0: no restarts)",
    )
    serve.add_argument("--log-dir", help="where server logs go")
    serve.add_argument("--list", action="store_true", help="list profiles and exit")

    for name, module, _runner, helptext in TOOLS:
        _add_tool(sub, name, module, helptext)
    return parser


TOOLS: tuple[tuple[str, str, str, str], ...] = (
    ("demo", "langchain_specreason.cli.demo", "run_demo", "the demo"),
    ("bench", "langchain_specreason.lab.bench.command", "run", "the benchmark"),
    ("arbitrage", "langchain_specreason.lab.training.command", "run", "the Arbitrage router"),
    ("label", "langchain_specreason.lab.labels.command", "run", "step labelling"),
    ("tune", "langchain_specreason.lab.tune.command", "run_tune", "tuning a setting for your pair"),
    (
        "probe",
        "langchain_specreason.lab.probe.command",
        "run_probe",
        "probing whether speculation can pay",
    ),
)
"""Subcommands whose modules need extras: (name, module with ``add_parser``, its async runner
of the parsed arguments, what it is)."""


def _add_tool(sub: Any, name: str, module: str, what: str) -> None:
    """Add a tool's subparser; without its extra, a stand-in that says which extra to install."""
    import importlib

    try:
        importlib.import_module(module).add_parser(sub)
    except ModuleNotFoundError as exc:
        error = missing_extra(f"`specreason {name}`", exc, name)
        if error is None:
            raise
        stand_in = sub.add_parser(
            name,
            help=f"{what} (needs the [{error.extra}] extra)",
            add_help=False,
            prefix_chars="\x00",  # every word, --help included, is the stand-in's to swallow
        )
        stand_in.add_argument("rest", nargs=argparse.REMAINDER)
        stand_in.set_defaults(missing_extra=error)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``specreason`` console script."""
    try:
        args = build_parser().parse_args(argv)
    except MissingExtraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # Ctrl-C and SIGTERM both stop what we started. SIGINT is set explicitly because a shell
    # that starts us in the background hands us SIGINT ignored.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGINT, _raise_interrupt)
    try:
        if getattr(args, "missing_extra", None) is not None:
            raise args.missing_extra
        return _dispatch(args)
    except ModuleNotFoundError as exc:
        error = missing_extra(f"`specreason {args.command}`", exc, args.command)
        if error is None:
            raise
        print(f"error: {error}", file=sys.stderr)
        return 2
    except SpecReasonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; servers stopped", file=sys.stderr)
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    """Run the parsed subcommand (a tool's module is imported here, with its extras)."""
    import importlib

    if args.command == "models":
        return _models(args)
    if args.command == "serve":
        return _serve(args)
    for name, module, runner, _what in TOOLS:
        if args.command == name:
            status: int = asyncio.run(getattr(importlib.import_module(module), runner)(args))
            return status
    return 0


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _models(args: argparse.Namespace) -> int:
    from ..serving.fetch import fetch, is_fetched, model_dir

    if args.models_command == "list":
        for name, spec in CATALOG.items():
            state = "fetched" if is_fetched(name) else "not fetched"
            print(f"{name:<22} {spec.title:<40} {state:<12} {model_dir(name)}")
        return 0
    names = args.names or list(CATALOG)
    for name in names:
        if name not in CATALOG:
            fetch(name)  # raises the one-line unknown-model error
    for name in names:
        path = fetch(name, quiet=args.quiet)
        print(f"{name}: {path}", flush=True)
    return 0


def _serve(args: argparse.Namespace) -> int:
    from ..serving.profiles import list_profiles, load_profile

    if args.list:
        for name in list_profiles():
            profile = load_profile(name)
            variants = f" (variants: {', '.join(profile.variants)})" if profile.variants else ""
            print(f"{name:<10} {profile.description}{variants}")
        return 0
    launcher = serve_launcher(args)
    print(starting_line(args, launcher), file=sys.stderr, flush=True)
    if launcher.plan is not None:
        replicas = len(next(iter(launcher.plan.replicas.values())))
        print(
            f"{replicas} replicas per role behind vllm-router "
            f"(policy {next(iter(launcher.plan.routers.values())).policy})",
            file=sys.stderr,
            flush=True,
        )
    # CPU: the plan is printed (the launcher refuses it at start unless --ignore-memory-plan)
    plan = None
    if launcher.profile.device == "cpu":
        try:
            plan = launcher.memory_plan()
        except ConfigError as exc:  # e.g. no /proc/meminfo: the flag starts without a plan
            if not args.ignore_memory_plan:
                raise
            print(f"no memory plan ({exc})", file=sys.stderr, flush=True)
    if plan is not None:
        print(plan.summary(), file=sys.stderr, flush=True)
    with launcher:
        print("servers ready; Ctrl-C stops them", file=sys.stderr, flush=True)
        for need in plan.servers if plan is not None else ():
            print(f"  {need.describe()}", file=sys.stderr, flush=True)
        while True:
            launcher.supervise()
            time.sleep(1.0)


def starting_line(args: argparse.Namespace, launcher: Launcher) -> str:
    """What ``specreason serve`` prints first: the profile, any model the flags replaced, logs."""
    profile = launcher.profile
    replaced = [
        f"{role} {getattr(profile, role).served_name}"
        for role in ("draft", "base")
        if getattr(args, f"{role}_model", None)
    ]
    instead = f" (instead: {', '.join(replaced)})" if replaced else ""
    return (
        f"starting {profile.name}{'/' + profile.variant if profile.variant else ''}: "
        f"{profile.description}{instead} (logs: {launcher.log_dir})"
    )


def serve_launcher(args: argparse.Namespace) -> Launcher:
    """The launcher of ``specreason serve``'s flags, checked (nothing is started).

    The key is ``--api-key``, else ``VLLM_API_KEY``; an unsafe host is refused here (see
    :func:`~langchain_specreason.serving.secrets.check_exposure`).
    """
    from pathlib import Path

    from ..serving.launcher import Launcher, default_replica_kv
    from ..serving.memory import KV_ENV, KV_FLAG
    from ..serving.profiles import Role, load_profile
    from ..serving.replicas import DEFAULT_POLICY
    from ..serving.secrets import SERVER_KEY_ENV

    if not args.profile:
        raise ConfigError("serve needs --profile NAME (see `specreason serve --list`)")
    if args.replicas == 1 and (args.router_policy or args.replica_port):
        raise ConfigError("--router-policy and --replica-port need --replicas N with N > 1")
    profile = load_profile(
        args.profile,
        variant=args.variant,
        draft_model=args.draft_model,
        base_model=args.base_model,
        draft_port=args.draft_port,
        base_port=args.base_port,
        host=args.host,
        extra_args={"draft": args.draft_arg, "base": args.base_arg},
        router_model=args.router_model,
        router_port=args.router_port,
        extra_env={
            "draft": _env_pairs(args.draft_env, "--draft-env"),
            "base": _env_pairs(args.base_env, "--base-env"),
        },
    )
    roles: tuple[Role, ...] = (
        (args.only,)
        if args.only
        else (("draft", "base", "router") if args.with_router else ("draft", "base"))
    )
    if "router" in roles and profile.router is None:
        raise ConfigError(f"profile {profile.name!r} has no [router] server")
    # replicas fit by default: each gets a small KV cache unless its role's was set here
    replica_kv = {
        role: kv
        for role, kv in default_replica_kv(profile, roles).items()
        if not any(e.startswith(KV_ENV + "=") for e in getattr(args, f"{role}_env"))
        and not any(a.startswith(KV_FLAG) for a in getattr(args, f"{role}_arg"))
    }
    launcher = Launcher(
        profile,
        roles=roles,
        echo=True,
        log_dir=Path(args.log_dir) if args.log_dir else None,
        api_key=args.api_key or os.environ.get(SERVER_KEY_ENV) or None,
        replicas=args.replicas,
        router_policy=args.router_policy or DEFAULT_POLICY,
        replica_port=args.replica_port,
        replica_kv=replica_kv if args.replicas > 1 else None,
        check_memory=not args.ignore_memory_plan,
        max_restarts=args.max_restarts,
        # replicas start one at a time, each warmed before the next: no stacked peaks
        one_at_a_time=args.replicas > 1,
        keep_profile_cores=args.keep_profile_cores,
    )
    launcher.check_exposure()
    return launcher


def _env_pairs(items: list[str], flag: str) -> dict[str, str]:
    """``KEY=VALUE`` items as a dict (ConfigError for an item without ``=``)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{flag} takes KEY=VALUE, got {item!r}")
        out[key] = value
    return out


if __name__ == "__main__":
    sys.exit(main())
