"""``python -m langchain_specreason.serving.router_main``: ``vllm-router`` with its key guard.

``vllm-router`` 0.1.17 has no authentication on its command line: ``--api-key`` is the key it
sends *to* workers, and ``--cors-allowed-origins`` still answers ``*``. Without a guard anyone
who reaches its port may call ``/add_worker`` (and then receive the clients' ``Authorization``
headers, i.e. their key), ``/remove_worker``, ``/workers`` or ``/flush_cache``.

Its server does have a key check, reachable only from Python: ``api_key_validation_urls``.
With it, every route (``/v1``, ``/health`` and the admin routes) answers 401 unless one of the
URLs accepts the request's ``Authorization`` header; a request without the header is refused
without asking. :mod:`.replicas` passes the replicas' ``/v1/models``, which check the key the
replicas were started with (measured on 0.1.17: no header, a wrong key -> 401 on every route;
the right key -> 200; a dead first URL falls through to the next). A key the router has
accepted before keeps working while the replicas are down (the requests then fail as
server errors); a new key, with every replica down, is refused with 401 (there is no one to ask).
``specreason serve`` stops when a pool has no replica left, so its clients then see the router
gone (connection refused) and fall back as for a dead server.

This module takes ``--api-key-validation-urls URL [URL ...]`` before the router's own flags,
parses the rest with ``vllm-router``'s own parser and starts the router as its command does.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence

VALIDATION_FLAG = "--api-key-validation-urls"


def split_validation_urls(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(urls, rest)``: the URLs after :data:`VALIDATION_FLAG` (up to the next flag), the rest."""
    args = list(argv)
    if VALIDATION_FLAG not in args:
        return [], args
    i = args.index(VALIDATION_FLAG)
    j = i + 1
    while j < len(args) and not args[j].startswith("-"):
        j += 1
    urls = args[i + 1 : j]
    if not urls:
        raise SystemExit(f"{VALIDATION_FLAG} needs at least one URL")
    return urls, args[:i] + args[j:]


def main(argv: Sequence[str] | None = None) -> None:
    """Start the router with the key guard (blocks until the router stops)."""
    urls, rest = split_validation_urls(sys.argv[1:] if argv is None else argv)
    try:
        from vllm_router import launch_router
        from vllm_router import router as router_module
    except ImportError:
        raise SystemExit(
            "--replicas needs vLLM's router: pip install "
            "'langchain-specreason[scale]' (the vllm-router package)"
        ) from None
    args = launch_router.parse_router_args(rest)
    if urls:
        # Router.from_args builds the Rust router from this module global
        router_module._Router = functools.partial(
            router_module._Router,
            api_key_validation_urls=urls,
        )
    launch_router.launch_router(args)


if __name__ == "__main__":
    main()
