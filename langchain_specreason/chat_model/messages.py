"""Messages the chat model passes on: earlier replies to the servers, trace steps to a stream."""

from __future__ import annotations

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage


def plain_reply(message: BaseMessage) -> BaseMessage:
    """An earlier reply as the servers read it: its text, its tool calls apart.

    A reply kept in ``output_version="v1"`` form has content blocks (``tool_call``,
    ``reasoning``, ...) that are not OpenAI content parts; its text stands for them (its tool
    calls travel in ``tool_calls``, as ChatOpenAI sends them).
    """
    if (
        isinstance(message, AIMessage)
        and isinstance(message.content, list)
        and any(
            isinstance(b, dict) and b.get("type") not in ("text", "image_url")
            for b in message.content
        )
    ):
        return message.model_copy(update={"content": message.text})
    return message


def step_chunk(text: str, think: bool) -> AIMessageChunk:
    """A step of the trace as a chunk: reasoning for a ``think`` model, content otherwise."""
    if think:
        return AIMessageChunk(content="", additional_kwargs={"reasoning_content": text})
    return AIMessageChunk(content=text)
