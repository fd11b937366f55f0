"""API keys of the vLLM servers, and redaction of secrets from what is logged or written.

A key reaches a server through its environment (``VLLM_API_KEY``, which vLLM reads when no
``--api-key`` flag is given), never through its command line: the command line shows in
``ps``, in the server's log and in ``meta.json``. Whatever is printed or written anyway goes
through :func:`redact_args` (``--api-key X``, ``--api-key=X``, ``--hf-token X``...) and
:func:`redact_env` (values of variables named like ``*KEY*``, ``*TOKEN*``, ``*SECRET*``,
``*PASSWORD*``); :func:`redact_record` applies both inside a ``meta.json``-shaped dict.

Exposure: vLLM started with ``VLLM_SERVER_DEV_MODE=1`` serves admin routes
(``/reset_prefix_cache``, ``/sleep``, ``/collective_rpc``, ``/server_info``...).
:func:`check_exposure` refuses such a server on a non-loopback address without an API key.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ConfigError
from ..redaction import looks_secret

SERVER_KEY_ENV = "VLLM_API_KEY"
"""The variable vLLM's API server reads its key from (``--api-key`` takes precedence)."""
CLIENT_KEY_ENVS = ("SPECREASON_BASE_API_KEY", SERVER_KEY_ENV)
"""Where the benchmark's and the labelling's clients look for a key, in order."""
DEV_MODE_ENV = "VLLM_SERVER_DEV_MODE"
REDACTED = "***"

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def is_secret_name(name: str) -> bool:
    """Whether an environment variable named ``name`` holds a secret (by its name)."""
    return looks_secret(name)


def redact_args(args: Iterable[str]) -> list[str]:
    """``args`` with the values of secret flags replaced by ``***``.

    Covers ``--api-key X``, ``--api-key=X``, several values after one flag (vLLM's
    ``--api-key K1 K2``), and ``--hf-token`` given without a value (nothing to hide).
    """
    out: list[str] = []
    hiding = False
    for arg in args:
        flag, eq, _ = arg.partition("=")
        if hiding and not arg.startswith("-"):
            out.append(REDACTED)
            continue
        hiding = False
        if arg.startswith("-") and looks_secret(flag):
            if eq:
                out.append(f"{flag}={REDACTED}")
            else:
                out.append(arg)
                hiding = True
            continue
        out.append(arg)
    return out


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the values of secret-named variables replaced by ``***``."""
    return {
        name: REDACTED if is_secret_name(name) and value else value for name, value in env.items()
    }


def redact_record(record: Any) -> Any:
    """A copy of a JSON-like value with secrets hidden (for ``meta.json`` and logs).

    Lists of strings under ``args``, ``command`` or ``argv`` go through :func:`redact_args`,
    string mappings under ``env`` through :func:`redact_env`, values under keys such as
    ``api_key`` or ``hf_token`` become ``***``; everything else is copied as is.
    """
    if isinstance(record, Mapping):
        out: dict[str, Any] = {}
        for key, value in record.items():
            name = str(key)
            if name in ("args", "command", "argv") and _strings(value):
                out[key] = redact_args(value)
            elif name == "env" and isinstance(value, Mapping):
                out[key] = redact_env({str(k): v for k, v in value.items()})
            elif _is_secret_field(name) and isinstance(value, str) and value:
                out[key] = REDACTED
            else:
                out[key] = redact_record(value)
        return out
    if isinstance(record, list | tuple):
        return [redact_record(item) for item in record]
    return record


def _strings(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)


def _is_secret_field(name: str) -> bool:
    # api_key, hf_token, client_secret, password; a bare "token" (a judge's reply) or "key"
    # (an id) in a record is data
    return looks_secret(name) and name.lower() not in ("key", "token")


def client_api_key(
    explicit: str | None = None, environ: Mapping[str, str] | None = None
) -> str | None:
    """The key clients send (``None``: none).

    ``explicit``, else ``SPECREASON_BASE_API_KEY``, else ``VLLM_API_KEY``; empty values count
    as unset.
    """
    if explicit:
        return explicit
    env = os.environ if environ is None else environ
    return next((env[name] for name in CLIENT_KEY_ENVS if env.get(name)), None)


def is_loopback(host: str) -> bool:
    """Whether a listen address is reachable from this machine only.

    ``0.0.0.0``, ``::``, ``""`` (every interface) and host names other than ``localhost``
    are not.
    """
    name = host.strip().strip("[]").lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def dev_mode(env: Mapping[str, str]) -> bool:
    """Whether ``VLLM_SERVER_DEV_MODE`` is on in a server's environment (as vLLM reads it)."""
    value = env.get(DEV_MODE_ENV, "").strip()
    try:
        return int(value) != 0
    except ValueError:
        return value.lower() in ("true", "yes", "on")


def server_key(env: Mapping[str, str], args: Iterable[str] = ()) -> str | None:
    """The API key a server started with ``env`` and ``args`` requires (the last one given)."""
    found = env.get(SERVER_KEY_ENV) or None
    args = list(args)
    for i, arg in enumerate(args):
        if arg.startswith("--api-key=") and arg.partition("=")[2]:
            found = arg.partition("=")[2]
        elif arg == "--api-key" and i + 1 < len(args) and not args[i + 1].startswith("-"):
            found = args[i + 1]
    return found


def has_api_key(env: Mapping[str, str], args: Iterable[str] = ()) -> bool:
    """Whether a server started with ``env`` and ``args`` requires an API key."""
    return server_key(env, args) is not None


def effective_host(host: str, args: Iterable[str]) -> str:
    """The address a server listens on, from its host and its extra args.

    The last ``--host`` wins (argparse keeps the last), so ``--base-arg=--host=0.0.0.0`` counts.
    """
    found = host
    items = list(args)
    for i, arg in enumerate(items):
        if arg == "--host" and i + 1 < len(items):
            found = items[i + 1]
        elif arg.startswith("--host="):
            found = arg.split("=", 1)[1]
    return found


def check_exposure(
    role: str, host: str, env: Mapping[str, str], args: Iterable[str] = ()
) -> str | None:
    """Refuse a dev-mode server open to the network without a key; else a warning or ``None``.

    Raises :class:`ConfigError` when ``host`` is not a loopback address, the server's
    environment sets ``VLLM_SERVER_DEV_MODE=1`` and no API key is set. Returns a warning when
    a non-loopback server has a key: vLLM's key guards only the ``/v1`` routes, not
    ``/invocations`` nor the dev-mode admin routes.
    """
    args = list(args)
    host = effective_host(host, args)
    if is_loopback(host):
        return None
    dev = dev_mode(env)
    if not has_api_key(env, args):
        if dev:
            raise ConfigError(
                f"refusing to start the {role} server on {host or '(every interface)'} with "
                f"{DEV_MODE_ENV}=1 and no API key: dev mode serves admin routes to anyone who "
                f"can reach the port; set a key (--api-key KEY or {SERVER_KEY_ENV}=KEY in the "
                "environment) or keep the default host 127.0.0.1"
            )
        return None
    routes = "/invocations and the dev-mode admin routes" if dev else "/invocations"
    return (
        f"warning: the {role} server listens on {host or '(every interface)'}; its API key "
        f"guards vLLM's /v1 routes only ({routes} stay open): keep the port behind a "
        "firewall or an authenticating proxy"
    )
