"""What the chat model learns from its servers: their served models and context windows.

Asked once (one ``/v1/models`` request to each server built from a URL, no retry), for
LangSmith's ``ls_model_name`` and ``profile["max_input_tokens"]``; a server that does not
answer leaves them to be learned by the first call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models.model_profile import ModelProfile

from ..endpoint import Endpoint, OpenAIEndpoint


def discovery_targets(endpoints: Sequence[Endpoint], on_caller_loop: bool) -> list[OpenAIEndpoint]:
    """The servers among ``endpoints`` to ask for their models and windows.

    On the sync API's loop a server with your own HTTP client is skipped (each client
    serves one event loop; asking would bind it to that loop).
    """
    return [
        e
        for e in endpoints
        if isinstance(e, OpenAIEndpoint)
        and (on_caller_loop or (e.http_client is None and e.http_async_client is None))
    ]


async def ask(servers: Sequence[OpenAIEndpoint]) -> list[int | None]:
    """Ask ``servers`` for their models at once (failures ignored); their windows, if known."""
    await asyncio.gather(*(e.discover() for e in servers), return_exceptions=True)
    return windows(servers)


def windows(servers: Sequence[OpenAIEndpoint]) -> list[int | None]:
    """The windows ``servers`` reported (``None`` for one not learned)."""
    return [e._window or None for e in servers]


def with_window(profile: ModelProfile, windows: Sequence[int | None]) -> ModelProfile | None:
    """``profile`` with ``max_input_tokens``, the smaller known window; ``None``: none known."""
    known = [w for w in windows if w]
    if not known:
        return None
    return ModelProfile(**{**profile, "max_input_tokens": min(known)})


def capabilities(reasoning_output: bool) -> ModelProfile:
    """What the model can do (``max_input_tokens`` joins once the servers' window is known)."""
    return ModelProfile(
        text_inputs=True,
        text_outputs=True,
        image_inputs=False,
        audio_inputs=False,
        video_inputs=False,
        pdf_inputs=False,
        tool_calling=True,
        tool_choice=True,
        tool_call_streaming=True,
        structured_output=True,
        temperature=True,
        reasoning_output=reasoning_output,
    )


def lazy_profile() -> property:
    """``ChatSpecReason.profile``: as ``ChatOpenAI``'s, with ``max_input_tokens`` on a fresh model.

    Read before the servers' window is known, an own profile (none given) first asks the
    servers once (``_discover``: one ``/v1/models`` request each, no retry, at most
    ``judge_timeout`` s), so ``SummarizationMiddleware(llm, trigger=("fraction", 0.8))`` can
    be built right after the model. It stays without ``max_input_tokens`` when no server
    answers, and when read inside a running event loop (never blocked there: the first
    awaited call learns it; or give ``profile={"max_input_tokens": ...}``).
    """

    def read(model: Any) -> ModelProfile | None:
        profile: ModelProfile | None = model.__dict__.get("profile")
        if profile and "max_input_tokens" not in profile and getattr(model, "_own_profile", False):
            model._discover()
            profile = model.__dict__.get("profile")
        return profile

    def write(model: Any, value: ModelProfile | None) -> None:
        model.__dict__["profile"] = value
        model.__pydantic_fields_set__.add("profile")

    return property(read, write, doc=lazy_profile.__doc__)
