"""Token counts on this machine, from the served base model's own tokenizer files.

``get_num_tokens_from_messages`` prefers these to a ``/tokenize`` round trip: the same chat
template and the same tokenizer the server uses, so the same count, in microseconds. A folder
qualifies when it holds ``tokenizer.json``: the ``tokenizer`` setting of ``ChatSpecReason``, or
else the model folder the base server reports at ``/v1/models`` (vLLM's ``root``) when that
folder exists here (a server on this machine, or a shared model cache).

Counting reads ``tokenizer.json`` with ``tokenizers`` and renders the chat template
(``chat_template.jinja`` or ``tokenizer_config.json``'s) with jinja2 as transformers does:
both come with the ``cpu`` and ``gpu`` extras (vLLM). Without jinja2 only plain text is counted
here; without ``tokenizers``, nothing.
Nothing here reaches the network: a folder that cannot be read gives ``None`` and the caller
asks the server.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol


class LocalCounter(Protocol):
    """Counts tokens as the served model's tokenizer does."""

    def count_text(self, text: str) -> int:
        """Tokens of plain ``text`` (no chat template, no special tokens)."""
        ...

    def count_messages(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> int | None:
        """Tokens of a chat prompt as the server renders it (``None``: cannot render here)."""
        ...


class _TextCounter:
    """The tokenizer alone: plain text only (no chat template to render)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def count_text(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def count_messages(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> int | None:
        return None


class _TemplateCounter(_TextCounter):
    """The tokenizer and the model's chat template (jinja2, as transformers renders it)."""

    def __init__(self, tokenizer: Any, template: Any, context: Mapping[str, Any]) -> None:
        super().__init__(tokenizer)
        self.template = template
        self.context = dict(context)

    def count_messages(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> int | None:
        try:
            text = self.template.render(
                messages=messages, tools=tools, add_generation_prompt=True, **self.context
            )
        except Exception:  # a template that refuses this list: the server says why, or counts
            return None
        return self.count_text(text)


def _token_text(value: Any) -> Any:
    """A special token of ``tokenizer_config.json``: a string, or an AddedToken's content."""
    return value.get("content") if isinstance(value, Mapping) else value


def _template_text(folder: Path, config: Mapping[str, Any]) -> str | None:
    """The chat template: ``chat_template.jinja``, else the config's (its ``default``)."""
    file = folder / "chat_template.jinja"
    if file.is_file():
        return file.read_text()
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, Mapping)}
        template = named.get("default")
    return template if isinstance(template, str) else None


def _compile(source: str) -> Any:
    """The template compiled as transformers compiles chat templates (sandboxed jinja2)."""
    from datetime import datetime

    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise ValueError(message)

    def tojson(value: Any, ensure_ascii: bool = False, indent: Any = None, **kw: Any) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, **kw)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(source)


def tokenizer_folder(path: str | Path | None) -> Path | None:
    """``path`` when it is a folder holding ``tokenizer.json`` on this machine, else ``None``."""
    if not path:
        return None
    folder = Path(path).expanduser()
    try:
        return folder if (folder / "tokenizer.json").is_file() else None
    except OSError:  # a name that is no path here (e.g. a hub id with odd characters)
        return None


@functools.cache
def _load(folder: str, chat_template_kwargs: tuple[tuple[str, Any], ...]) -> LocalCounter | None:
    path = Path(folder)
    try:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    except Exception:  # tokenizers missing, or a file it cannot read
        return None
    try:
        config_file = path / "tokenizer_config.json"
        config = json.loads(config_file.read_text()) if config_file.is_file() else {}
        source = _template_text(path, config)
        if source is None:
            return _TextCounter(tokenizer)
        template = _compile(source)
    except Exception:  # jinja2 missing, or a template it cannot compile: text only
        return _TextCounter(tokenizer)
    special = {
        key: _token_text(value)
        for key, value in config.items()
        if key.endswith("_token") and isinstance(value, (str, Mapping))
    }
    return _TemplateCounter(tokenizer, template, {**special, **dict(chat_template_kwargs)})


def local_counter(
    path: str | Path | None, chat_template_kwargs: Mapping[str, Any] | None = None
) -> LocalCounter | None:
    """A counter for the tokenizer in ``path`` (loaded once per folder), or ``None``.

    ``chat_template_kwargs`` are the ones the requests send (e.g. ``enable_thinking``), so the
    template renders as the server renders it.
    """
    folder = tokenizer_folder(path)
    if folder is None:
        return None
    kwargs = tuple(sorted((chat_template_kwargs or {}).items()))
    try:
        return _load(str(folder.resolve()), kwargs)
    except TypeError:  # unhashable template arguments: load without the cache
        return _load.__wrapped__(str(folder.resolve()), kwargs)


def served_root(listed: list[dict[str, Any]], model: str | None) -> str | None:
    """The ``root`` a ``/v1/models`` listing gives ``model`` (the first listed, if unnamed)."""
    for entry in listed:
        if model in (None, entry.get("id")):
            root = entry.get("root")
            return str(root) if root else None
    return None
