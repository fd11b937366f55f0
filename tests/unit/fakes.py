"""Scripted endpoints for unit tests: no network, every request recorded."""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from langchain_specreason.endpoint import ChatRequest, Completion


class ScriptedEndpoint:
    """An :class:`~langchain_specreason.endpoint.Endpoint` answering from a function."""

    def __init__(self, name: str, handler: Callable[[ChatRequest], Completion]) -> None:
        self.name = name
        self.handler = handler
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        return self.handler(request)

    async def stream(self, request: ChatRequest) -> AsyncIterator[Completion]:
        self.requests.append(request)
        done = self.handler(request)
        for word in done.text.split(" ") if done.text else []:
            yield Completion(text=word + " ")
        yield Completion(
            text="",
            finish_reason=done.finish_reason,
            completion_tokens=done.completion_tokens,
            seconds=done.seconds,
            tool_calls=done.tool_calls,
        )

    def judge_calls(self) -> list[ChatRequest]:
        return [r for r in self.requests if r.max_tokens == 1 and r.top_logprobs]

    def generation_calls(self) -> list[ChatRequest]:
        return [r for r in self.requests if not (r.max_tokens == 1 and r.top_logprobs)]


def step(
    text: str,
    tokens: int = 5,
    *,
    end: bool = False,
    delimiter: str = "\n\n",
    stop: str | None = None,
) -> Completion:
    """A step completion as vLLM reports it (the stop string removed from the text)."""
    if end:
        return Completion(
            text=text,
            finish_reason="stop",
            stop_reason=None,
            completion_tokens=tokens,
            seconds=0.01,
        )
    return Completion(
        text=text,
        finish_reason="stop",
        stop_reason=stop or delimiter,
        completion_tokens=tokens,
        seconds=0.01,
    )


def score(digit: str, top: list[tuple[str, float]] | None = None) -> Completion:
    return Completion(
        text=digit,
        finish_reason="length",
        completion_tokens=1,
        prompt_tokens=100,
        cached_tokens=64,
        seconds=0.01,
        top_logprobs=top or [(digit, 0.0)],
    )


def is_judge(request: ChatRequest) -> bool:
    return request.max_tokens == 1 and bool(request.top_logprobs)


def partial_of(request: ChatRequest) -> str:
    """The partial assistant text a step request continues ('' when the reply is not begun)."""
    return request.messages[-1]["content"] if request.continue_final else ""


def question_sum(request: ChatRequest) -> int:
    """The right answer to a "What is a+b?" problem, read from the request's first message."""
    a, b = re.search(r"What is (\d+)\+(\d+)", request.messages[0]["content"]).groups()
    return int(a) + int(b)


def sum_draft(request: ChatRequest) -> Completion:
    """A draft for "What is a+b?" problems: one step ending its message with the right sum."""
    return step(f"The answer is {question_sum(request)}.", end=True)


def sum_base(request: ChatRequest, *, lead: str = "", tokens: int = 6) -> Completion:
    """A base for "What is a+b?" problems: judges every step 9 and answers with the right sum
    (``lead`` before it) in ``tokens`` tokens."""
    if is_judge(request):
        return score("9")
    return Completion(
        text=f"{lead}The answer is {question_sum(request)}.",
        finish_reason="stop",
        completion_tokens=tokens,
        seconds=0.01,
    )


@contextlib.contextmanager
def loopback_server(
    respond: Callable[[str, dict[str, Any]], tuple[int, dict[str, Any] | None]],
    *,
    seen: list[tuple[str, str, dict[str, str]]] | None = None,
) -> Iterator[str]:
    """A local HTTP stand-in for vLLM routes: ``respond(path, json_body) -> (status, json)``.

    GET and POST are answered (a GET has an empty body); ``seen``, when given, receives each
    request's ``(method, path, headers)`` (header names lower-cased). Sockets are opened for
    127.0.0.1 only, for the block's duration; yields the root URL.
    """
    import pytest_socket

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, method: str) -> None:
            if seen is not None:
                seen.append((method, self.path, {k.lower(): v for k, v in self.headers.items()}))
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            status, body = respond(self.path, json.loads(raw) if raw else {})
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._answer("GET")

        def do_POST(self):
            self._answer("POST")

        def log_message(self, *args):
            pass

    pytest_socket.enable_socket()
    pytest_socket.socket_allow_hosts(["127.0.0.1"])
    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


class WindowedScriptedEndpoint(ScriptedEndpoint):
    """A scripted endpoint that reports a context window and counts a prompt's tokens
    (``per_word`` tokens per word of its messages: two servers' tokenizers may differ)."""

    def __init__(
        self,
        name: str,
        handler: Callable[[ChatRequest], Completion],
        *,
        window: int,
        per_word: int = 1,
    ) -> None:
        super().__init__(name, handler)
        self.window = window
        self.per_word = per_word

    async def max_model_len(self) -> int | None:
        return self.window

    async def count_tokens(
        self,
        messages: list[dict[str, Any]],
        *,
        continue_final: bool = False,
        tools: list[dict[str, Any]] | None = None,
    ) -> int:
        return self.per_word * sum(len(str(m.get("content") or "").split()) for m in messages)


class FakeProc:
    """A ``subprocess.Popen`` stand-in for launcher tests: a pid, ``poll`` reads ``code`` (None
    while it runs; set it to make the process die), ``wait`` returns at once."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.code: int | None = None

    def poll(self):
        return self.code

    def wait(self, timeout=None):
        return 0


def chat_completion_body(content: str, **choice: Any) -> dict[str, Any]:
    """An OpenAI ``chat.completion`` JSON body with one choice: an assistant message holding
    ``content``, ``finish_reason`` "stop" unless ``choice`` says otherwise (more choice keys, e.g.
    ``stop_reason``, are added as given)."""
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                **choice,
                "message": {"role": "assistant", "content": content},
            }
        ],
    }


def chat_completion_chunk(content: str, finish_reason: str | None = None) -> dict[str, Any]:
    """One ``chat.completion.chunk`` of an OpenAI stream: a content delta, no finish reason
    unless given."""
    return {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish_reason}],
    }
