"""One server call as an LLM child run: LangSmith shows each with its model, tokens and cost.

Each call is an LLM run (``run_type="llm"``): its input the messages sent, as text; its
output one generation whose message carries the call's ``usage_metadata`` (prompt tokens,
of which ``cache_read`` were in the server's prefix cache, and completion tokens) and whose
metadata names the served model (``ls_provider="vllm"``, ``ls_model_name``), which is what
LangSmith's token and cost columns read. What the call decided (a judge's score, a step's
finish) is in ``llm_output``.

Counted once: the message carries no ``response_metadata["model_name"]``, so langchain-core's
``get_usage_metadata_callback()`` (which adds up only messages that name their model) counts
the chat model's reply, whose ``usage_metadata`` is already the total of these calls, and not
each call again; the calls' own tokens are summed by :class:`CallUsage` (the model name is in
``llm_output``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackManager, BaseCallbackHandler
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    convert_to_messages,
    get_buffer_string,
)
from langchain_core.messages.ai import UsageMetadata, add_usage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.runnables import RunnableConfig

from ..endpoint import Completion

T = TypeVar("T")

PROVIDER = "vllm"
"""``ls_provider`` of the server calls (LangSmith's pricing map: provider and model)."""


@dataclass(frozen=True)
class Traced:
    """What a call's run shows: its text, token counts and what it decided."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None
    output: dict[str, Any]
    """The call's own outputs (score and decision, finish reason, ...): ``llm_output``."""

    def usage(self) -> UsageMetadata:
        """The call's tokens as LangChain counts them (``cache_read`` when reported)."""
        usage = UsageMetadata(
            input_tokens=self.prompt_tokens,
            output_tokens=self.completion_tokens,
            total_tokens=self.prompt_tokens + self.completion_tokens,
        )
        if self.cached_tokens is not None:
            usage["input_token_details"] = {"cache_read": self.cached_tokens}
        return usage


DRAFT_CALLS = frozenset({"draft_step"})
"""The server calls the draft model makes; every other traced call is the base model's."""


class CallUsage(BaseCallbackHandler):
    """Adds up the server calls' tokens as they end: by served model, and by role.

    ``usage_metadata`` is by served model name (``usage_by_model``); ``output_tokens`` the
    same calls' output tokens by role, ``draft`` (its steps) and ``base`` (judge readings,
    its own steps, rewrites, the answer): ``tokens_by_model``. One count of one set of
    calls, so the two never disagree.
    """

    def __init__(self) -> None:
        self.usage_metadata: dict[str, UsageMetadata] = {}
        self.output_tokens: dict[str, int] = {"draft": 0, "base": 0}
        self._names: dict[UUID, str] = {}

    def on_llm_start(
        self, serialized: dict[str, Any], prompts: list[str], *, run_id: UUID, **kwargs: Any
    ) -> None:
        """Remember which call a run is (its name says whose server it asks)."""
        self._names[run_id] = str(kwargs.get("name") or (serialized or {}).get("name") or "")

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """Count one traced call (a run without ``llm_output["model_name"]`` is not ours)."""
        name = self._names.pop(run_id, "")
        model = (response.llm_output or {}).get("model_name")
        generation = response.generations[0][0] if response.generations else None
        message = getattr(generation, "message", None)
        usage = getattr(message, "usage_metadata", None)
        if model and usage:
            before = self.usage_metadata.get(model)
            self.usage_metadata[model] = usage if before is None else add_usage(before, usage)
            role = "draft" if name in DRAFT_CALLS else "base"
            self.output_tokens[role] += int(usage.get("output_tokens") or 0)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A failed call: nothing to count."""
        self._names.pop(run_id, None)


def served_model(endpoint: object) -> str:
    """The served model's name (what LangSmith prices), else the endpoint's role name."""
    return str(getattr(endpoint, "model", None) or getattr(endpoint, "name", "model"))


async def traced_call(
    config: RunnableConfig,
    name: str,
    metadata: dict[str, Any],
    inputs: dict[str, Any],
    call: Callable[[], Awaitable[T]],
    outputs: Callable[[T], Traced],
    *,
    model: str,
) -> T:
    """Run one server call as an LLM child run of ``model`` (with ``metadata``)."""
    manager = AsyncCallbackManager.configure(
        inheritable_callbacks=config.get("callbacks"),
        local_metadata={
            **metadata,
            "ls_provider": PROVIDER,
            "ls_model_name": model,
            "ls_model_type": "chat",
        },
        local_tags=["specreason"],
    )
    # an LLM run of prompt text, not a chat-model run: callbacks counting the chat model's
    # own runs (on_chat_model_start) see one per call of ChatSpecReason, as with any chat model
    [run] = await manager.on_llm_start(
        {"name": name},
        [get_buffer_string(_messages(inputs))],
        name=name,
        invocation_params={"model": model},
    )
    try:
        result = await call()
    except BaseException as exc:
        await run.on_llm_error(exc)
        raise
    traced = outputs(result)
    message = AIMessage(
        content=traced.text,
        usage_metadata=traced.usage(),
        response_metadata={"model_provider": PROVIDER},  # no model_name: counted once
    )
    await run.on_llm_end(
        LLMResult(
            generations=[[ChatGeneration(message=message)]],
            llm_output={**traced.output, "model_name": model},
        )
    )
    return result


def _messages(inputs: dict[str, Any]) -> list[BaseMessage]:
    """The messages of a call as LangChain messages (a judge shows the step it reads)."""
    if "messages" in inputs:
        return convert_to_messages(inputs["messages"])
    return [HumanMessage(content=str(inputs.get("step", "")))]


def completion_outputs(done: Completion) -> Traced:
    """What a traced completion shows."""
    return Traced(
        text=done.text,
        prompt_tokens=done.prompt_tokens or 0,
        completion_tokens=done.completion_tokens or 0,
        cached_tokens=done.cached_tokens,
        output={
            "text": done.text,
            "finish_reason": done.finish_reason,
            "completion_tokens": done.completion_tokens,
            "prompt_tokens": done.prompt_tokens,
            "cached_tokens": done.cached_tokens,
            "seconds": round(done.seconds, 4),
        },
    )
