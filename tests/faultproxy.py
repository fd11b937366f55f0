"""A fault-injecting HTTP proxy for tests: in front of a real server, it answers some requests
with a fault (429 with Retry-After, a 503 storm, an HTML page or cut JSON with status 200, an
event stream cut short) and forwards the rest unchanged.

Standard library ``http.server`` in a thread, ``httpx`` upstream; HTTP/1.0 replies (the
connection closes at the end of each), so a forwarded event stream passes chunk by chunk.

    with FaultProxy("http://127.0.0.1:8102") as proxy:
        proxy.inject("503", times=2)        # the next two POSTs get a 503
        OpenAIEndpoint(proxy.url)           # ... http://127.0.0.1:<port>/v1
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

FAULTS = ("401", "429", "503", "html", "truncated-json", "truncated-stream")
HOP = {"host", "content-length", "connection", "transfer-encoding", "keep-alive", "accept-encoding"}


@dataclass
class Fault:
    kind: str
    times: int
    retry_after: float = 1.0
    events: int = 3
    """``truncated-stream``: the events forwarded before the cut."""
    stream_only: bool = False
    """Only requests asking for a stream (``"stream": true``) get it."""


@dataclass
class Seen:
    """One request the proxy received."""

    at: float
    path: str
    stream: bool
    fault: str | None


@dataclass
class FaultProxy:
    upstream: str
    """The real server's root URL (no ``/v1``)."""
    faults: list[Fault] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.upstream = self.upstream.rstrip("/").removesuffix("/v1")
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The proxy's ``/v1`` URL, for a client."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def inject(self, kind: str, times: int = 1, **options: Any) -> None:
        """The next ``times`` POST requests (that match) get fault ``kind``."""
        if kind not in FAULTS:
            raise ValueError(f"unknown fault {kind!r}: one of {FAULTS}")
        with self._lock:
            self.faults.append(Fault(kind, times, **options))

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()

    def _take(self, stream: bool) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.times > 0 and (stream or not fault.stream_only):
                    fault.times -= 1
                    return fault
        return None

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            self._forward(b"", None)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                stream = bool(json.loads(body or b"{}").get("stream"))
            except ValueError:
                stream = False
            fault = proxy._take(stream)
            proxy.seen.append(
                Seen(time.monotonic(), self.path, stream, fault.kind if fault else None)
            )
            if fault is None or fault.kind == "truncated-stream":
                self._forward(body, fault)
            elif fault.kind == "429":
                self._reply(
                    429,
                    b'{"error": {"message": "busy"}}',
                    "application/json",
                    {"retry-after": f"{fault.retry_after:g}"},
                )
            elif fault.kind == "401":  # what vLLM answers a wrong key (--api-key)
                self._reply(401, b'{"error": "Unauthorized"}', "application/json")
            elif fault.kind == "503":
                self._reply(503, b'{"error": {"message": "overloaded"}}', "application/json")
            elif fault.kind == "html":
                self._reply(
                    200, b"<html><body>502 Bad Gateway (a proxy)</body></html>", "text/html"
                )
            else:  # truncated-json
                self._reply(
                    200,
                    b'{"id": "cmpl-1", "object": "chat.completion", "choices": [',
                    "application/json",
                )

        def _reply(
            self, status: int, body: bytes, kind: str, headers: dict[str, str] | None = None
        ) -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def _forward(self, body: bytes, fault: Fault | None) -> None:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
            with (
                httpx.Client(timeout=600) as client,
                client.stream(
                    self.command, proxy.upstream + self.path, content=body, headers=headers
                ) as upstream,
            ):
                self.send_response(upstream.status_code)
                for name, value in upstream.headers.items():
                    if name.lower() not in HOP and name.lower() != "content-encoding":
                        self.send_header(name, value)
                self.end_headers()
                events = 0
                for chunk in upstream.iter_raw():
                    if fault is not None:  # truncated-stream: cut after `events` events
                        events += chunk.count(b"\n\n")
                        if events >= fault.events:
                            self.wfile.write(chunk)
                            self.wfile.flush()
                            return  # the connection closes: no [DONE], no finish reason
                    self.wfile.write(chunk)
                    self.wfile.flush()

    return Handler
