"""The openai SDK clients of an endpoint, one per event loop (an httpx2 pool serves one loop).

A caller's HTTP client (``http_client`` for the sync API's loop thread, ``http_async_client``
for async code) is bound to the first loop that uses it; a second loop is refused with a
:class:`ConfigError` instead of failing inside the pool.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Mapping

import httpx2 as httpx  # the HTTP library of the openai SDK (>= 3)
import openai

import langchain_specreason.sync_bridge as sync_bridge  # its loop runs the sync API

from ..errors import ConfigError
from .routing import RoutingHeaders

Bindings = dict[int, weakref.ReferenceType[asyncio.AbstractEventLoop]]
"""The loop each given HTTP client is bound to, by the client's ``id``."""


def given_client(
    loop: asyncio.AbstractEventLoop,
    http_client: httpx.AsyncClient | None,
    http_async_client: httpx.AsyncClient | None,
    bound: Bindings,
    name: str,
) -> httpx.AsyncClient | None:
    """The caller's HTTP client for ``loop``, bound to it in ``bound`` (a pool serves one loop).

    ``name`` is the endpoint's, for the error when the client is already bound elsewhere.
    """
    sync = loop is sync_bridge._LOOP  # the loop thread of the sync API
    chosen, label = (
        (http_client, "http_client")
        if sync and http_client
        else (http_async_client, "http_async_client")
        if http_async_client
        else (http_client, "http_client")
    )
    if chosen is None:
        return None
    binding = bound.get(id(chosen))
    if binding is not None and binding() is not loop:
        raise ConfigError(
            f"{name} endpoint: the {label} given is already used on another event "
            "loop, and an httpx2 client's connection pool serves one loop only (sync "
            "calls run on their own loop thread): pass http_client= for the sync API and "
            "http_async_client= for the async one, or create the model inside the loop "
            "that runs it"
        )
    bound[id(chosen)] = weakref.ref(loop)
    return chosen


def sdk_client(
    base_url: str,
    api_key: str,
    timeout: httpx.Timeout,
    http_client: httpx.AsyncClient | None,
    transport: httpx.AsyncBaseTransport | None,
    default_headers: Mapping[str, str],
) -> openai.AsyncOpenAI:
    """An openai SDK client that never retries itself (the endpoint does).

    It sends through ``http_client``, else through a client of its own on ``transport`` when
    one is given; ``default_headers`` and the run's routing key go with every request.
    """
    if http_client is None and transport is not None:
        http_client = httpx.AsyncClient(transport=transport, timeout=timeout)
    return openai.AsyncOpenAI(
        base_url=base_url,
        api_key=api_key,
        timeout=timeout,
        max_retries=0,
        http_client=http_client,
        # read at each request: the run's routing key (X-Session-ID) goes along
        default_headers=RoutingHeaders(default_headers),
    )
