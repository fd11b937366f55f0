"""vLLM's own routes beside the OpenAI API: ``/tokenize``, prompt logprobs, ``/classify``.

Each route is a function of plain values: ``call`` sends (the endpoint's concurrency limit and
retries: ``call(fn, *args, _retry=..., **kwargs)``), ``client`` is the openai SDK client of
the running event loop, ``name`` and ``base_url`` name the endpoint in errors. ``timeout`` is
the one of a call that generates at most one token.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2 as httpx  # the HTTP library of the openai SDK (>= 3)
import openai

from ..errors import EndpointError
from .base import Classified, PromptLogprobs

READ_PREFIX_CACHE_XARG = "specreason_read_prefix_cache"
"""The ``vllm_xargs`` key that lets a ``prompt_logprobs`` request read the prefix cache (the
server-side half is :mod:`langchain_specreason.serving.vllm_plugin`)."""

Call = Callable[..., Awaitable[Any]]
"""Sends a request: ``call(fn, *args, _retry=True, **kwargs)`` awaits ``fn(*args, **kwargs)``
within the endpoint's concurrency limit, with its retries and typed errors."""


def server_root(base_url: str) -> str:
    """The server's root URL from its OpenAI base URL (vLLM's own routes live there)."""
    return base_url.rstrip("/").removesuffix("/v1")


async def classify(
    call: Call,
    client: openai.AsyncOpenAI,
    name: str,
    base_url: str,
    model: str,
    texts: list[str],
    *,
    truncate: int | None,
    timeout: httpx.Timeout,
) -> Classified:
    """Class probabilities of ``texts`` from a classifier server (vLLM ``/classify``).

    ``truncate`` keeps the last ``truncate`` tokens of each text (vLLM's
    ``truncate_prompt_tokens``).
    """
    body: dict[str, Any] = {"model": model, "input": texts}
    if truncate:
        # vLLM's pooling endpoints cut from the right unless told otherwise
        body.update(truncate_prompt_tokens=truncate, truncation_side="left")
    url = server_root(base_url) + "/classify"
    start = time.perf_counter()
    resp = await call(client.post, url, body=body, cast_to=object, options={"timeout": timeout})
    seconds = time.perf_counter() - start
    try:
        rows = sorted(resp["data"], key=lambda row: row["index"])
        probs = [[float(p) for p in row["probs"]] for row in rows]
    except (KeyError, TypeError) as exc:
        raise EndpointError(
            name,
            base_url,
            f"/classify answered without probabilities: {exc!r}; "
            "is this a classifier served with --runner pooling?",
        ) from None
    usage = resp.get("usage") or {}
    return Classified(
        probs=probs, prompt_tokens=int(usage.get("prompt_tokens") or 0), seconds=seconds
    )


def chat_prompt(
    model: str,
    messages: list[dict[str, Any]],
    *,
    continue_final: bool,
    tools: list[dict[str, Any]] | None,
    chat_template_kwargs: dict[str, Any] | None,
) -> dict[str, Any]:
    """The ``/tokenize`` body of a chat prompt, rendered as the chat requests are.

    ``continue_final`` renders the prompt that continues the last assistant message; otherwise
    the template's generation prompt is added.
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "continue_final_message": continue_final,
        "add_generation_prompt": not continue_final,
    }
    if tools:
        body["tools"] = tools
    if chat_template_kwargs:  # rendered as the requests are
        body["chat_template_kwargs"] = chat_template_kwargs
    return body


async def tokenize(
    call: Call,
    client: openai.AsyncOpenAI,
    name: str,
    base_url: str,
    body: dict[str, Any],
    *,
    timeout: httpx.Timeout,
    retry: bool = True,
) -> list[int]:
    """Token ids of a ``/tokenize`` ``body`` (a chat prompt or a text); ``retry=False``: once."""
    url = server_root(base_url) + "/tokenize"
    resp = await call(
        client.post,
        url,
        body=body,
        cast_to=object,
        options={"timeout": timeout},
        _retry=retry,
    )
    try:
        return [int(t) for t in resp["tokens"]]
    except (KeyError, TypeError, ValueError):
        raise EndpointError(
            name,
            base_url,
            f"malformed reply: /tokenize answered without tokens ({str(resp)[:60]!r})",
        ) from None


async def prompt_logprobs(
    call: Call,
    client: openai.AsyncOpenAI,
    name: str,
    base_url: str,
    model: str,
    token_ids: list[int],
    *,
    read_cache: bool,
    timeout: httpx.Timeout,
    start: float,
) -> PromptLogprobs:
    """Log-probability of each prompt token, from one forward pass (vLLM ``prompt_logprobs``).

    vLLM prefills a prompt-logprobs request whole, prefix cache or not. With ``read_cache``
    the request asks a server running our vLLM plugin to read the cache anyway; positions
    read from it come back as ``None`` (see :attr:`PromptLogprobs.logprobs`). ``seconds`` count
    from ``start`` (``time.perf_counter``).
    """
    extra: dict[str, Any] = {"prompt_logprobs": 0}
    if read_cache:
        extra["vllm_xargs"] = {READ_PREFIX_CACHE_XARG: 1}
    resp = await call(
        client.completions.create,
        model=model,
        prompt=token_ids,
        max_tokens=1,
        temperature=0.0,
        extra_body=extra,
        timeout=timeout,
    )
    seconds = time.perf_counter() - start
    try:
        rows = (resp.choices[0].model_extra or {}).get("prompt_logprobs") or (
            resp.model_extra or {}
        ).get("prompt_logprobs")
        if rows is None:
            raise KeyError("prompt_logprobs")
        values: list[float | None] = []
        texts: list[str | None] = []
        for position, row in enumerate(rows):
            entry = None if row is None else row.get(str(token_ids[position]))
            values.append(None if entry is None else float(entry["logprob"]))
            texts.append(None if entry is None else entry.get("decoded_token"))
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise EndpointError(
            name,
            base_url,
            f"/v1/completions answered without prompt_logprobs ({exc!r}); is this a vLLM server?",
        ) from None
    usage = resp.usage
    cached = None
    details = getattr(usage, "prompt_tokens_details", None) if usage else None
    if details is not None and getattr(details, "cached_tokens", None) is not None:
        cached = int(details.cached_tokens)
    if cached:  # not computed (our vLLM plugin zero-fills them)
        values[:cached] = [None] * min(cached, len(values))
        texts[:cached] = [None] * min(cached, len(texts))
    return PromptLogprobs(
        values,
        texts,
        prompt_tokens=usage.prompt_tokens if usage else 0,
        cached_tokens=cached,
        seconds=seconds,
    )


async def reset_prefix_cache(client: openai.AsyncOpenAI, base_url: str) -> bool | None:
    """Empty the server's prefix cache: ``True`` done, ``False`` refused, ``None`` no server.

    vLLM serves ``POST /reset_prefix_cache`` only with ``VLLM_SERVER_DEV_MODE=1`` (the CPU
    profiles set it). Not retried: a benchmark asks once before each problem.
    """
    url = server_root(base_url) + "/reset_prefix_cache"
    try:
        await client.post(url, cast_to=httpx.Response)
    except (openai.APIConnectionError, openai.APITimeoutError):
        return None
    except openai.APIStatusError:
        return False
    return True
