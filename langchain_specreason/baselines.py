"""One model alone, same prompt and budget: the yardstick SpecReason is measured against."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage

from .config import SpecReasonConfig
from .endpoint import ChatRequest, Endpoint
from .formats import to_openai_messages


@dataclass(frozen=True)
class SingleModelRun:
    """The reply of one model written in one uninterrupted call."""

    text: str
    tokens: int
    seconds: float
    finish_reason: str | None


async def single_model(
    endpoint: Endpoint,
    messages: Sequence[BaseMessage | dict[str, Any]],
    config: SpecReasonConfig | None = None,
) -> SingleModelRun:
    """Let ``endpoint`` answer alone, with the sampling and the token budget of ``config``."""
    cfg = config or SpecReasonConfig()
    done = await endpoint.complete(
        ChatRequest(
            messages=to_openai_messages(messages),
            max_tokens=cfg.budget + cfg.answer_max_tokens,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            seed=cfg.seed,
        )
    )
    return SingleModelRun(done.text, done.completion_tokens, done.seconds, done.finish_reason)
