"""Token counts for ``get_num_tokens``: local, by the server, or estimated.

The base model's own tokenizer on this machine first, else the base server's exact count
(``/tokenize``), else an offline estimate.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_openai_messages
from langchain_core.utils.function_calling import convert_to_openai_tool

from ..endpoint import Endpoint, OpenAIEndpoint
from ..errors import ConfigError, EndpointError
from ..sync_bridge import run_sync
from .fields import ChatSpecReasonFields
from .local_tokens import LocalCounter, local_counter, served_root

KEPT_COUNTS = 1024
"""How many message lists' exact counts :func:`messages_count` remembers."""


def countable(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """Any message list as OpenAI dicts to count (no user message needed; ``[]`` counts 0)."""
    return [dict(m) for m in convert_to_openai_messages(list(messages))] if messages else []


async def count_text(base: OpenAIEndpoint, text: str, *, retry: bool = True) -> int:
    """Tokens of ``text`` by the base server's ``/tokenize`` (one attempt unless ``retry``)."""
    return len(await base.tokenize_text(text, retry=retry))


def tiktoken_estimate(messages: list[dict[str, Any]]) -> int:
    """Offline estimate: tiktoken's cl100k_base when its file is cached, else ~4 chars a token."""
    texts = [
        m["content"] if isinstance(m.get("content"), str) else str(m.get("content") or "")
        for m in messages
    ]
    try:
        import tiktoken

        encode = tiktoken.get_encoding("cl100k_base").encode
        counts = [len(encode(t)) for t in texts]
    except Exception:  # no network to fetch the BPE file, and none cached
        counts = [(len(t) + 3) // 4 for t in texts]
    return 3 + sum(4 + n for n in counts)


def server_count(
    base: Endpoint | None, count: Callable[[OpenAIEndpoint], Coroutine[Any, Any, int]]
) -> int | None:
    """A count by the base server (``/tokenize``); ``None`` when it cannot answer."""
    if not isinstance(base, OpenAIEndpoint):
        return None
    try:
        return run_sync(count(base))
    except EndpointError:
        return None


def find_local_counter(
    folder: str | None, base: Endpoint | None, chat_template_kwargs: Any = None
) -> tuple[LocalCounter | None, bool]:
    """The base model's tokenizer on this machine, and whether that answer is final.

    ``folder`` (the ``tokenizer`` setting) when given; else the folder the base server reports
    as its model's ``root``, when it exists here (one ``/v1/models`` request, no retry). Not
    final when the server did not answer: it is asked again at the next count.
    """
    if folder:
        return local_counter(folder, chat_template_kwargs), True
    if not isinstance(base, OpenAIEndpoint):
        return None, True
    try:
        listed = run_sync(base.models(retry=False))
    except EndpointError:
        return None, False
    return local_counter(served_root(listed, base.model), chat_template_kwargs), True


SYSTEM_ROLES = ("system", "developer")

PROBE = [{"role": "user", "content": "x"}]
"""The one-message list :func:`implicit_system` renders with and without a system message."""


def implicit_system(exact: Callable[[list[dict[str, Any]]], int | None]) -> int:
    """Tokens a chat template adds for its default system prompt (Qwen's "You are Qwen, ...").

    ``exact`` counts a list as the template renders it. The difference between :data:`PROBE`
    alone (the template may inject its default) and after an empty system message (it does
    not); 0 when the template has no default or a probe cannot be counted.
    """
    alone = exact(PROBE)
    explicit = exact([{"role": "system", "content": ""}, *PROBE])
    if alone is None or explicit is None:
        return 0
    return max(0, alone - explicit)


def monotone_count(
    conversation: list[dict[str, Any]], exact: Callable[[list[dict[str, Any]]], int | None]
) -> int | None:
    """``exact(conversation)``, less :func:`implicit_system` when it opens with no system message.

    A template that injects a default system prompt into a list without one (Qwen's "You are
    Qwen, created by Alibaba Cloud. ...") drops it when the list brings its own: rendered,
    ``[system, user]`` can be shorter than ``[user]``, and LangChain's ``trim_messages``, which
    counts the system message and the rest apart and adds them up, keeps the system message
    alone. Leaving the default's text out of every count makes counts monotone (adding a
    message never lowers them) and additive enough (the parts' counts add up to at least the
    whole's): exact for a list that opens with a system message, or under a template without
    a default; short of the rendered prompt by the default's text otherwise. ``None`` when
    ``exact`` cannot count ``conversation``.
    """
    total = exact(conversation)
    if total is None or conversation[0].get("role") in SYSTEM_ROLES:
        return total
    return max(0, total - implicit_system(exact))


def messages_count(
    base: Callable[[], Endpoint | None],
    messages: list[BaseMessage],
    tools: Sequence[Any] | None,
    counts: dict[str, int],
    local: Callable[[], LocalCounter | None] = lambda: None,
) -> int:
    """Tokens of ``messages`` (and ``tools``) as the base server's chat template renders them.

    Made monotone by :func:`monotone_count`. ``local`` gives the base model's tokenizer on this
    machine (``None``: none), which counts without a request; else ``base`` gives the base
    server (``None``: none configured), asked only for a list not in ``counts``, the exact
    counts kept so far (the oldest dropped past :data:`KEPT_COUNTS`); with no server
    reachable, an estimate, not kept (the server may come back).
    """
    conversation = countable(messages)
    if not conversation:
        return 0
    schemas = [convert_to_openai_tool(t) for t in tools] if tools else None

    def exact(listed: list[dict[str, Any]]) -> int | None:
        key = json.dumps([listed, schemas], sort_keys=True, default=str)
        if key not in counts:
            counter = local()
            count = counter.count_messages(listed, schemas) if counter else None
            if count is None:
                count = server_count(
                    base(), lambda server: server.count_tokens(listed, tools=schemas, retry=False)
                )
            if count is None:
                return None
            if len(counts) >= KEPT_COUNTS:
                counts.pop(next(iter(counts)))
            counts[key] = count
        return counts[key]

    count = monotone_count(conversation, exact)
    if count is None:  # no server: an estimate, not kept (the server may come back)
        return tiktoken_estimate(conversation)
    return count


def text_count(base: Endpoint | None, text: str, local: LocalCounter | None = None) -> int:
    """Tokens of ``text``: the local tokenizer's or the base server's count, else an estimate."""
    if local is not None:
        return local.count_text(text)
    count = server_count(base, lambda server: count_text(server, text, retry=False))
    if count is not None:
        return count
    return tiktoken_estimate([{"role": "user", "content": text}]) - 7


class TokenCounting(ChatSpecReasonFields):
    """Token counts of :class:`~.model.ChatSpecReason`: local, by the server, or estimated."""

    def _base_or_none(self) -> Endpoint | None:
        """The base server, or ``None`` when none is configured (counts are then estimates)."""
        try:
            return self.endpoint("base")
        except ConfigError:
            return None

    def get_num_tokens_from_messages(
        self, messages: list[BaseMessage], tools: Sequence[Any] | None = None
    ) -> int:
        """Tokens of any message list as the base server's chat template renders it.

        By the base model's own tokenizer and chat template on this machine (see
        :attr:`tokenizer`: no request); else by one ``/tokenize`` request (no retry) per
        distinct list, remembered (1,024 lists), so ``trim_messages(..., token_counter=llm)``
        asks once per candidate; with no server configured or reachable, an offline estimate
        (tiktoken). Needs no user message.

        Adding a message never lowers the count, and the counts of a list's parts add up to
        at least the whole's, as LangChain's trimmers and middlewares assume: the text of the
        template's default system prompt, which the template injects only into a list without
        a system message (Qwen's "You are Qwen, ..."; measured once on a probe, see
        :func:`monotone_count`), is left out of every count. A list that opens with a system
        message counts exactly; one without counts the prompt less that default (all of it
        under a template without one).
        """
        return messages_count(
            self._base_or_none, messages, tools, self._counts, self._local_counter
        )

    def get_num_tokens(self, text: str) -> int:
        """Tokens of ``text`` (exact by the local tokenizer, or through the server)."""
        return text_count(self._base_or_none(), text, self._local_counter())

    def _local_counter(self) -> LocalCounter | None:
        """The base model's tokenizer on this machine (see :attr:`tokenizer`), found once."""
        if not self._local:
            body = {**self.model_kwargs, **(self.extra_body or {})}
            counter, final = find_local_counter(
                self.tokenizer, self._base_or_none(), body.get("chat_template_kwargs")
            )
            if not final:
                return None
            self._local.append(counter)
        return self._local[0]
