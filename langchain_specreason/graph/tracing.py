"""One server call as a child run, so LangSmith shows every draft, judgement and rewrite."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from langchain_core.callbacks import AsyncCallbackManager
from langchain_core.runnables import RunnableConfig

from ..endpoint import Completion

T = TypeVar("T")


async def traced_call(
    config: RunnableConfig,
    name: str,
    metadata: dict[str, Any],
    inputs: dict[str, Any],
    call: Callable[[], Awaitable[T]],
    outputs: Callable[[T], dict[str, Any]],
) -> T:
    """Run one server call as a child run (LangSmith shows one per call, with ``metadata``)."""
    manager = AsyncCallbackManager.configure(
        inheritable_callbacks=config.get("callbacks"),
        local_metadata=metadata,
        local_tags=["specreason"],
    )
    run = await manager.on_chain_start({"name": name}, inputs, name=name)
    try:
        result = await call()
    except BaseException as exc:
        await run.on_chain_error(exc)
        raise
    await run.on_chain_end(outputs(result))
    return result


def completion_outputs(done: Completion) -> dict[str, Any]:
    """What a traced completion shows as its outputs."""
    return {
        "text": done.text,
        "finish_reason": done.finish_reason,
        "completion_tokens": done.completion_tokens,
        "prompt_tokens": done.prompt_tokens,
        "cached_tokens": done.cached_tokens,
        "seconds": round(done.seconds, 4),
    }
