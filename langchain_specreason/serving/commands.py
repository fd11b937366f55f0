"""A server's command line and environment: catalog models and trained routers resolved.

``{model:NAME}`` references inside a profile's server arguments are expanded to the model's local
folder; the environment adds the profile's variables, CPU defaults and the server's key.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path

from ..arbitrage.features import ROUTER_CONFIG
from ..errors import ServeError
from .catalog import CATALOG
from .fetch import cache_root, fetch, model_dir
from .profiles import ServerSpec
from .secrets import SERVER_KEY_ENV

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
            raise ServeError(
                f"no trained router at {folder}; make one with `specreason "
                f"arbitrage train --out {folder}` (or pass --router-model DIR)"
            )
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
    common = [
        "--served-model-name",
        spec.served_name,
        "--host",
        spec.host,
        "--port",
        str(spec.port),
        *expand_args(spec.args, fetch_missing=fetch_missing),
    ]
    if device == "cpu":
        return [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            model,
            *common,
        ]
    return ["vllm", "serve", model, *common]


def server_env(spec: ServerSpec, device: str, *, api_key: str | None = None) -> dict[str, str]:
    """Environment of a server process: ours, plus the profile's, plus offline defaults on CPU.

    A variable set to ``""`` by the profile or an override is removed.

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
    # KEY= (an empty value) in the profile or an override unsets KEY: vLLM reads some variables
    # with int() and fails on "", e.g. VLLM_CPU_KVCACHE_SPACE= to size the cache with
    # --kv-cache-memory-bytes instead. Inherited variables are passed on as they are.
    for key, value in spec.env:
        if value == "":
            env.pop(key, None)
        else:
            env[key] = value
    if api_key:
        env[SERVER_KEY_ENV] = api_key
    return env
