"""An OpenAI-compatible server (vLLM) as an endpoint.

:class:`OpenAIEndpoint` is an OpenAI-compatible server (vLLM) reached through the openai SDK.
Transient failures are retried a bounded number of times, and errors become the package's
typed errors (see :mod:`.retries`); replies are read in :mod:`.replies`, vLLM's own routes
(``/tokenize``, prompt logprobs, ``/classify``) are in :mod:`.vllm_routes`.

Requests carry the endpoint's ``extra_body`` (vLLM's sampling options, ``chat_template_kwargs``,
...) and ``default_headers``. ``http_client`` / ``http_async_client`` are ``httpx2.AsyncClient``
objects the openai SDK sends through; a client's connection pool belongs to one event loop, so
each is bound to the first loop that uses it (see :class:`OpenAIEndpoint`).

Three timeouts bound a call: ``connect_timeout`` to open a connection (a black-holed host
fails fast), ``judge_timeout`` for a call that generates at most one token (a judge's reading,
prompt logprobs, a classification, tokenizing, listing models), ``timeout`` for a generation.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx2 as httpx  # the HTTP library of the openai SDK (>= 3)
import openai
from pydantic import SecretStr
from tenacity import wait_exponential_jitter as wait_exponential_jitter  # tests patch it here

import langchain_specreason.endpoint.vllm_routes as vllm_routes  # its routes, by their names

from ..errors import ConfigError, EndpointError, endpoint_error
from .base import ChatRequest, Classified, Completion, PromptLogprobs
from .clients import Bindings, given_client, sdk_client
from .extra_body import RESERVED_BODY_KEYS as RESERVED_BODY_KEYS
from .extra_body import chat_arguments, check_extra_body
from .replies import _add_usage, _choice, as_chat_completion, read_stream
from .replies import generated_text as generated_text
from .retries import MAX_RETRY_AFTER as MAX_RETRY_AFTER
from .retries import retried
from .retries import retry_after as retry_after
from .vllm_routes import READ_PREFIX_CACHE_XARG as READ_PREFIX_CACHE_XARG
from .vllm_routes import server_root as server_root


def endpoint_pair(
    draft_url: str,
    base_url: str,
    *,
    api_key: SecretStr | str | None = None,
    draft_api_key: SecretStr | str | None = None,
    draft_model: str | None = None,
    base_model: str | None = None,
    timeout: float = 600.0,
    judge_timeout: float = 60.0,
    connect_timeout: float = 10.0,
    max_retries: int = 2,
    max_concurrency: int | None = None,
    extra_body: Mapping[str, Any] | None = None,
    default_headers: Mapping[str, str] | None = None,
    http_client: httpx.AsyncClient | None = None,
    http_async_client: httpx.AsyncClient | None = None,
) -> tuple[OpenAIEndpoint, OpenAIEndpoint]:
    """The draft and base endpoints of a server pair (the draft's key defaults to the base's).

    ``extra_body``, ``default_headers`` and the HTTP clients go to both endpoints.
    """
    limits: dict[str, Any] = {
        "timeout": timeout,
        "judge_timeout": judge_timeout,
        "connect_timeout": connect_timeout,
        "max_retries": max_retries,
        "max_concurrency": max_concurrency,
        "extra_body": extra_body,
        "default_headers": default_headers,
        "http_client": http_client,
        "http_async_client": http_async_client,
    }
    draft = OpenAIEndpoint(
        draft_url, name="draft", model=draft_model, api_key=draft_api_key or api_key, **limits
    )
    base = OpenAIEndpoint(base_url, name="base", model=base_model, api_key=api_key, **limits)
    return draft, base


class OpenAIEndpoint:
    """An OpenAI-compatible server (vLLM) with bounded retries on transient errors.

    Example::

        base = OpenAIEndpoint("http://127.0.0.1:8102/v1", name="base")
        done = await base.complete(ChatRequest([{"role": "user", "content": "2+2?"}], 8))

    ``extra_body`` is merged into every chat-completions request (steps, the judge's
    readings, the answer; a request's own ``extra_body`` wins) and its ``chat_template_kwargs``
    into ``/tokenize``, so prompts render alike everywhere. ``default_headers`` go with every
    request.

    HTTP clients: the endpoint keeps one SDK client per event loop. ``http_async_client`` (an
    ``httpx2.AsyncClient``, the openai SDK's HTTP library) is used on the loop of your async
    code; ``http_client`` (also an ``httpx2.AsyncClient``: the sync API runs on async code) on
    the private loop thread that runs sync calls (``invoke``, ``stream``); given only one, it
    serves whichever loop uses it first. A client's connection pool belongs to one event loop,
    so a client used from a second loop (``asyncio.run`` twice, or sync and async calls with a
    single client) raises :class:`ConfigError` instead of failing inside the pool: pass both,
    or create the endpoint inside the loop that runs it.
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key: SecretStr | str | None = None,
        name: str = "endpoint",
        timeout: float = 600.0,
        judge_timeout: float = 60.0,
        connect_timeout: float = 10.0,
        max_retries: int = 2,
        max_concurrency: int | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        extra_body: Mapping[str, Any] | None = None,
        default_headers: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
        http_async_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        """Served model name; ``None``: the one model the server lists at ``/v1/models``."""
        key = api_key if isinstance(api_key, SecretStr) else SecretStr(api_key or "EMPTY")
        self._api_key = key
        self.name = name
        for label, value in (
            ("timeout", timeout),
            ("judge_timeout", judge_timeout),
            ("connect_timeout", connect_timeout),
        ):
            if not value > 0:
                raise ConfigError(f"{label} must be a positive number of seconds, got {value}")
        if max_retries < 0:
            raise ConfigError(f"max_retries must be at least 0, got {max_retries}")
        self.timeout = timeout
        """Seconds a generation may take (one attempt)."""
        self.judge_timeout = judge_timeout
        """Seconds a call that generates at most one token may take (one attempt): a judge's
        reading, prompt logprobs, a classification, tokenizing, listing models."""
        self.connect_timeout = connect_timeout
        """Seconds to open a connection: an unreachable host fails fast."""
        self.max_retries = max_retries
        if max_concurrency is not None and max_concurrency < 1:
            raise ConfigError(f"max_concurrency must be at least 1, got {max_concurrency}")
        self.max_concurrency = max_concurrency
        """Calls in flight at once from this endpoint (``None``: no limit); more wait."""
        self._transport = transport
        self.extra_body = check_extra_body(extra_body)
        """Merged into every chat-completions request (vLLM's ``repetition_penalty``,
        ``chat_template_kwargs``, ...)."""
        self.default_headers = dict(default_headers or {})
        """Headers sent with every request."""
        for label, given in (
            ("http_client", http_client),
            ("http_async_client", http_async_client),
        ):
            if given is not None and not isinstance(given, httpx.AsyncClient):
                raise ConfigError(
                    f"{label} must be an httpx2.AsyncClient (the HTTP library of the openai "
                    f"SDK >= 3; the sync API runs on async code too), got "
                    f"{type(given).__module__}.{type(given).__name__}"
                )
        if transport is not None and (http_client is not None or http_async_client is not None):
            raise ConfigError("pass a transport or HTTP clients, not both")
        self.http_client = http_client
        self.http_async_client = http_async_client
        self._bound: Bindings = {}
        self._window: int | None = None
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI]
        self._clients = weakref.WeakKeyDictionary()
        self._gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]
        self._gates = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIEndpoint({self.base_url!r}, name={self.name!r}, model={self.model!r})"

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The SDK client of the running event loop (httpx pools are bound to one loop)."""
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            timeout = httpx.Timeout(self.timeout, connect=self.connect_timeout)
            given = given_client(
                loop, self.http_client, self.http_async_client, self._bound, self.name
            )
            client = sdk_client(
                self.base_url,
                self._api_key.get_secret_value(),
                timeout,
                given,
                self._transport,
                self.default_headers,
            )
            self._clients[loop] = client
        return client

    def _gate(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """Holds one of ``max_concurrency`` places while a call is in flight."""
        if self.max_concurrency is None:
            return contextlib.nullcontext()
        loop = asyncio.get_running_loop()
        gate = self._gates.get(loop)
        if gate is None:
            gate = self._gates[loop] = asyncio.Semaphore(self.max_concurrency)
        return gate

    def _limit(self, seconds: float) -> httpx.Timeout:
        return httpx.Timeout(seconds, connect=self.connect_timeout)

    @property
    def _short(self) -> httpx.Timeout:
        """The timeout of a call that generates at most one token."""
        return self._limit(self.judge_timeout)

    async def _call(self, fn: Any, *args: Any, _retry: bool = True, **kwargs: Any) -> Any:
        async def attempt() -> Any:  # the slot is held per attempt, not through back-off
            async with self._gate():
                return await fn(*args, **kwargs)

        return await self._retried(attempt, _retry=_retry)

    async def _retried(self, fn: Any, *args: Any, _retry: bool = True, **kwargs: Any) -> Any:
        return await retried(
            self.name, self.base_url, self.max_retries, fn, *args, _retry=_retry, **kwargs
        )

    async def model_name(self, *, retry: bool = True) -> str:
        """The served model name, discovered from ``/v1/models`` when not given."""
        if self.model is None:
            page = await self._call(self.client.models.list, timeout=self._short, _retry=retry)
            self.model = self._only_model([m.id for m in page.data])
        return self.model

    def _only_model(self, ids: list[str]) -> str:
        """The one model a server lists; a server with several needs the model named."""
        if not ids:
            raise EndpointError(self.name, self.base_url, "the server lists no model")
        if len(ids) > 1:
            raise ConfigError(
                f"the {self.name} server at {self.base_url} serves "
                f"{len(ids)} models ({', '.join(ids)}); name the one to use "
                f"(model=... / {self.name}_model=...)"
            )
        return ids[0]

    async def discover(self) -> None:
        """Learn the served model's name and window from one ``/v1/models`` request.

        One attempt within ``judge_timeout``, no retry: what a client shows before its first
        call (LangSmith's model name, a chat model's profile). Raises :class:`EndpointError`.
        """
        try:
            page = await self.client.models.list(timeout=self._short)
        except openai.APIError as exc:
            raise endpoint_error(self.name, self.base_url, f"/v1/models: {exc}", exc) from exc
        if self.model is None:
            self.model = self._only_model([m.id for m in page.data])
        window = self._listed_window(page.data)
        if window is None:
            raise EndpointError(self.name, self.base_url, "the server lists no such model")
        self._window = window

    async def max_model_len(self) -> int | None:
        """The server's context window, when it reports one (vLLM does); asked once."""
        if self._window is None:
            page = await self._call(self.client.models.list, timeout=self._short)
            self._window = self._listed_window(page.data) or 0
        return self._window or None

    def cached_max_model_len(self) -> int | None:
        """The context window already learned (:meth:`discover`, :meth:`max_model_len`), no I/O.

        ``None`` when it was never learned (the server was down, or not asked yet) or the
        server reports none.
        """
        return self._window or None

    def _listed_window(self, listed: Sequence[openai.types.Model]) -> int | None:
        """The window a ``/v1/models`` listing gives our model (the first listed, if unnamed).

        ``0`` when the server reports none; ``None`` when it does not list the model.
        """
        for model in listed:
            if self.model in (None, model.id):
                value = (model.model_extra or {}).get("max_model_len")
                return int(value) if value else 0
        return None

    async def _kwargs(self, request: ChatRequest) -> dict[str, Any]:
        model = await self.model_name()
        timeout = self._short if request.max_tokens <= 1 else self._limit(self.timeout)
        return chat_arguments(request, model, self.extra_body, timeout)

    async def complete(self, request: ChatRequest) -> Completion:
        """Run ``request`` and return the whole completion."""
        kwargs = await self._kwargs(request)
        start = time.perf_counter()
        resp = self._completion(await self._call(self.client.chat.completions.create, **kwargs))
        seconds = time.perf_counter() - start
        if not resp.choices:
            raise EndpointError(self.name, self.base_url, "the server returned no choice")
        out = _choice(resp.choices[0], request, seconds)
        _add_usage(out, resp.usage)
        return out

    def _completion(self, resp: Any) -> Any:
        return as_chat_completion(resp, self.name, self.base_url)

    async def sample(self, request: ChatRequest, n: int) -> list[Completion]:
        """``n`` completions of ``request`` in one call (the server batches them).

        Usage (prompt and completion tokens of all ``n``) is on the first.
        """
        if n < 1:
            raise ConfigError(f"n must be at least 1, got {n}")
        kwargs = await self._kwargs(request)
        start = time.perf_counter()
        resp = self._completion(
            await self._call(self.client.chat.completions.create, n=n, **kwargs)
        )
        seconds = time.perf_counter() - start
        if len(resp.choices) != n:
            raise EndpointError(
                self.name,
                self.base_url,
                f"asked for {n} choices, the server returned {len(resp.choices)}",
            )
        outs = [_choice(c, request, seconds) for c in sorted(resp.choices, key=lambda c: c.index)]
        _add_usage(outs[0], resp.usage)
        return outs

    async def classify(self, texts: list[str], *, truncate: int | None = None) -> Classified:
        """Class probabilities of ``texts`` from a classifier server (vLLM ``/classify``).

        ``truncate`` keeps the last ``truncate`` tokens of each text (vLLM's
        ``truncate_prompt_tokens``).
        """
        model = await self.model_name()
        return await vllm_routes.classify(
            self._call,
            self.client,
            self.name,
            self.base_url,
            model,
            texts,
            truncate=truncate,
            timeout=self._short,
        )

    async def tokenize(
        self,
        messages: list[dict[str, Any]],
        *,
        continue_final: bool = False,
        tools: list[dict[str, Any]] | None = None,
        retry: bool = True,
    ) -> list[int]:
        """Token ids of a chat prompt as the server renders it (vLLM ``/tokenize``).

        ``continue_final`` renders the prompt that continues the last assistant message, as
        :class:`ChatRequest` sends it; otherwise the template's generation prompt is added.
        ``tools`` are rendered into the prompt as the chat template does. ``retry=False``:
        one attempt (a caller with a fallback of its own).
        """
        body = vllm_routes.chat_prompt(
            await self.model_name(retry=retry),
            messages,
            continue_final=continue_final,
            tools=tools,
            chat_template_kwargs=self.extra_body.get("chat_template_kwargs"),
        )
        return await self._tokenize(body, retry)

    async def tokenize_text(self, text: str, *, retry: bool = True) -> list[int]:
        """Token ids of plain ``text`` (no chat template, no special tokens)."""
        return await self._tokenize(
            {
                "model": await self.model_name(retry=retry),
                "prompt": text,
                "add_special_tokens": False,
            },
            retry,
        )

    async def _tokenize(self, body: dict[str, Any], retry: bool = True) -> list[int]:
        return await vllm_routes.tokenize(
            self._call,
            self.client,
            self.name,
            self.base_url,
            body,
            timeout=self._short,
            retry=retry,
        )

    async def count_tokens(
        self,
        messages: list[dict[str, Any]],
        *,
        continue_final: bool = False,
        tools: list[dict[str, Any]] | None = None,
        retry: bool = True,
    ) -> int:
        """Tokens of a chat prompt as the server renders it (see :meth:`tokenize`)."""
        return len(
            await self.tokenize(messages, continue_final=continue_final, tools=tools, retry=retry)
        )

    async def reset_prefix_cache(self) -> bool | None:
        """Empty the server's prefix cache: ``True`` done, ``False`` refused, ``None`` no server.

        vLLM serves ``POST /reset_prefix_cache`` only with ``VLLM_SERVER_DEV_MODE=1`` (the CPU
        profiles set it). Not retried: a benchmark asks once before each problem.
        """
        return await vllm_routes.reset_prefix_cache(self.client, self.base_url)

    async def models(self, *, retry: bool = True) -> list[dict[str, Any]]:
        """What the server lists at ``/v1/models`` (id, root, ``max_model_len``, ...)."""
        page = await self._call(self.client.models.list, timeout=self._short, _retry=retry)
        return [{"id": m.id, **(m.model_extra or {})} for m in page.data]

    async def prompt_logprobs(
        self, token_ids: list[int], *, read_cache: bool = True
    ) -> PromptLogprobs:
        """Log-probability of each prompt token, from one forward pass (vLLM ``prompt_logprobs``).

        vLLM prefills a prompt-logprobs request whole, prefix cache or not. With ``read_cache``
        the request asks a server running our vLLM plugin to read the cache anyway; positions
        read from it come back as ``None`` (see :attr:`PromptLogprobs.logprobs`).
        """
        start = time.perf_counter()
        return await vllm_routes.prompt_logprobs(
            self._call,
            self.client,
            self.name,
            self.base_url,
            await self.model_name(),
            token_ids,
            read_cache=read_cache,
            timeout=self._short,
            start=start,
        )

    async def stream(self, request: ChatRequest) -> AsyncIterator[Completion]:
        """Run ``request`` streamed; the final item has no text but the finish and usage.

        Text arrives as items with ``text``; pieces of tool calls as they come, as items with
        ``tool_call_chunks`` (the final item has the whole calls).
        """
        kwargs = await self._kwargs(request)
        kwargs["stream"] = True
        kwargs["stream_options"] = {"include_usage": True}
        async with self._gate():  # held until the stream ends
            async for item in self._stream(kwargs):
                yield item

    async def _stream(self, kwargs: dict[str, Any]) -> AsyncIterator[Completion]:
        start = time.perf_counter()
        stream = await self._retried(self.client.chat.completions.create, **kwargs)
        items = read_stream(
            stream, name=self.name, base_url=self.base_url, timeout=self.timeout, start=start
        )
        async with contextlib.aclosing(items):
            async for item in items:
                yield item
