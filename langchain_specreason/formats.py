"""Prompt rendering for a model family: where the reasoning sits in the assistant message.

Every request is rendered by the server's own chat template (vLLM chat completions with
``continue_final_message``). A family only decides how the steps kept so far become the text
of the partial assistant message, and what ends the thinking:

* ``think``: reasoning models that think inside ``<think>...</think>`` (DeepSeek-R1 distills,
  QwQ, Qwen3). The partial message is ``"<think>\\n" + steps``; the tag stays open while judging,
  so templates that strip closed thinking from history keep it visible. The answer follows
  ``</think>``.
* ``instruct``: plain instruct models whose whole reply is the reasoning (Qwen2.5, SmolLM2).
  The partial message is the steps; the reply ends when the model ends its message.

Adding a family is one instance of :class:`TagFormat` (or any object that satisfies
:class:`PromptFormat`) registered in :data:`FORMATS`, e.g.
``FORMATS["seed"] = TagFormat("<seed:think>", "</seed:think>")``.

The text we send is byte-stable: the partial message is always the plain concatenation of the
kept steps exactly as they were kept, so consecutive requests share their prefix and the
server's prefix cache can reuse it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.messages import BaseMessage, convert_to_openai_messages

from .errors import ConfigError, InputError


class PromptFormat(Protocol):
    """How a model family lays out its reasoning in the assistant message."""

    thinking_end: str | None
    """Text that ends the thinking (``</think>``), ``None`` when the reply is the reasoning."""

    def render(self, steps: Sequence[str]) -> str:
        """The partial assistant message holding ``steps`` (thinking left open)."""
        ...


@dataclass(frozen=True)
class TagFormat:
    """Reasoning inside an opening and a closing tag, followed by the answer."""

    thinking_start: str = "<think>\n"
    thinking_end: str | None = "</think>"

    def render(self, steps: Sequence[str]) -> str:
        """``<think>\\n`` followed by the steps."""
        return self.thinking_start + "".join(steps)


@dataclass(frozen=True)
class PlainFormat:
    """The whole reply is the reasoning; there is no separate answer."""

    thinking_end: str | None = None

    def render(self, steps: Sequence[str]) -> str:
        """The steps, concatenated."""
        return "".join(steps)


FORMATS: dict[str, PromptFormat] = {
    "think": TagFormat(),  # type: ignore[dict-item]  # frozen dataclass fields satisfy it
    "instruct": PlainFormat(),  # type: ignore[dict-item]
}


def step_stops(fmt: PromptFormat, delimiter: str) -> list[str]:
    """The stop strings of one reasoning step: ``delimiter``, and the end of thinking if any."""
    return [delimiter] + ([fmt.thinking_end] if fmt.thinking_end else [])


def get_format(family: str | PromptFormat) -> PromptFormat:
    """Look a family up by name (an object satisfying :class:`PromptFormat` passes through)."""
    if not isinstance(family, str):
        return family
    try:
        return FORMATS[family]
    except KeyError:
        known = ", ".join(FORMATS)
        raise ConfigError(f"unknown prompt family {family!r}; known: {known}") from None


THINKING_SWITCHES = ("enable_thinking", "thinking")
"""``chat_template_kwargs`` keys that turn a model's thinking on or off (Qwen3's
``enable_thinking``; ``thinking`` in DeepSeek-V3.1 and Granite templates)."""


def check_thinking_switch(fmt: PromptFormat, extra_body: Mapping[str, Any] | None) -> None:
    """ConfigError when ``extra_body`` turns thinking off for a family that thinks.

    A ``think`` family speculates on the text inside ``<think>...</think>``: with
    ``chat_template_kwargs={"enable_thinking": False}`` there is none to speculate on. Turning
    it on (or leaving it out) passes through; requests continue an open ``<think>`` message, so
    the switch, which only shapes the template's generation prompt, changes nothing there.
    """
    kwargs = (extra_body or {}).get("chat_template_kwargs") or {}
    if not fmt.thinking_end or not isinstance(kwargs, Mapping):
        return
    for key in THINKING_SWITCHES:
        if key in kwargs and kwargs[key] is False:
            raise ConfigError(
                f"chat_template_kwargs {{{key!r}: False}} turns the model's thinking off, but "
                "family='think' speculates on the thinking: drop the switch, or run the model "
                "without thinking as family='instruct' (its reply is then the reasoning)"
            )


def to_openai_messages(messages: Sequence[BaseMessage | dict[str, Any]]) -> list[dict[str, Any]]:
    """Convert a conversation to OpenAI dicts, merging consecutive messages of the same role.

    Chat templates often refuse two user or two assistant turns in a row; merging keeps the
    text of each (joined by a blank line). Messages with tool calls are never merged.
    """
    if not messages:
        raise InputError("the conversation is empty; pass at least one message")
    converted = convert_to_openai_messages(list(messages))
    out: list[dict[str, Any]] = []
    for msg in converted:
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev["role"] == msg["role"]
            and msg["role"] != "tool"
            and isinstance(prev.get("content"), str)
            and isinstance(msg.get("content"), str)
            and not prev.get("tool_calls")
            and not msg.get("tool_calls")
        ):
            prev["content"] = f"{prev['content']}\n\n{msg['content']}"
        else:
            out.append(dict(msg))
    if not any(m["role"] in ("user", "tool") for m in out):
        raise InputError("the conversation has no user message to answer")
    return out


def continue_messages(
    conversation: list[dict[str, Any]], fmt: PromptFormat, steps: Sequence[str]
) -> tuple[list[dict[str, Any]], bool]:
    """Messages that make a model continue the reasoning after ``steps``.

    Returns ``(messages, continue_final)``. With nothing to continue (an instruct reply not yet
    begun), the template's own generation prompt opens the reply: the same bytes that
    ``continue_final_message`` would produce, without an empty final message.
    """
    partial = fmt.render(steps)
    if not partial.strip():
        return list(conversation), False
    return [*conversation, {"role": "assistant", "content": partial}], True
