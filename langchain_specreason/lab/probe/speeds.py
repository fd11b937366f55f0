"""Speeds measured against a server: decode (1 and N concurrent streams) and prefill.

Decode: ``N`` requests start together, each a *different* prompt (the prompts taken in turn:
with fewer prompts than streams some streams repeat one, and the command says so), greedy, with
a ``max_tokens`` cap, and each stream ends where the model ends its answer: natural
continuations of real prompts, as the requests of ``specreason bench load`` are. Each is
streamed; a stream's decode time runs from its first text to its end, so its prefill stays
out, and its tokens are the server's own count (the stream's usage), so streams of different
lengths are each timed by what they wrote. :attr:`Decode.step_s` is the decode seconds of all
the streams over their tokens after the first: the time of one decode step of a batch of up
to ``N``, weighted by tokens (with equal lengths it is the mean of the streams' steps). A
batch shrinks as its shorter answers end, as it does in a real load of ``N`` users. One
stream alone gives the server's cost per token; ``step_s(N) / step_s(1)`` is how much more a
batch of ``N`` costs than one request. Each measurement runs ``--repeats`` times on the same
prompts and the fastest is kept (:func:`fastest`); it carries the slowest repeat's step too,
so :attr:`Decode.spread` (slowest over fastest, minus 1) is the measurement's relative noise,
which the verdict's noise band reads (:mod:`.ceilings`).

``ignore_eos`` (``specreason probe --ignore-eos``) keeps the old measurement: every stream
writes exactly ``max_tokens`` tokens, past the end of its answer (vLLM's sampling option, in
the request's ``extra_body``).

**Why the old reading was wrong under load.** Until issue 54 the decode speeds were 48-token
``ignore_eos`` continuations of 4 built-in questions, and the ``cpu`` pair's probe
(``benchmarks/probe-cpu-sd``) read ``sd`` at 0.99x the plain base at 4 streams and 0.98x at
8, where real GSM8K problems, 4 at once, gave 1.39-1.56x. What the code did:

- the prompts were taken in turn, so at 8 streams every built-in question ran twice: greedy,
  the two copies share their prompt (the prefix cache serves the second's prefill) and write
  the same text, which is not 8 users;
- 48 tokens is 6 to 24 seconds of decode on that pair, while the ``N`` requests' first texts
  came seconds apart (mean time to the first text at 4 streams: 2.5 s on the base, 4.2 s on
  the ``sd`` base, where two models prefill; at 8: 5.2 s and 7.3 s). The early streams'
  decode windows hold the later streams' prefills, a large share of so short a window and a
  larger one on the ``sd`` server; an answer of a few hundred tokens dilutes it, as a real
  request does;
- 48 tokens is the opening of an answer (mostly the question restated), not the arithmetic
  most of a real answer is, and the draft's acceptance, which ``sd``'s speed is, differs
  between the two; forced past the end of message (``ignore_eos``) the text is no request's.

The reading itself shows it is not a steady batch step: the plain base read faster at 4
streams than alone (0.349 s a step against 0.397 s) and went 1.32x, 0.88x, 1.22x one stream's
step at 2, 4, 8. Which of the causes weighed most was not measured; the probe now measures
what a loaded server serves (different real problems, natural lengths, a reasoning-length
cap), and ``bench load --probe`` puts its prediction beside the measured cell.

Prefill: one request of about ``tokens`` prompt tokens that no earlier request shares (a
fresh nonce opens it), then the same prefix with another question at its end, which the
server's prefix cache can serve (whole blocks only). Both ask for one token.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from ...endpoint import ChatRequest, Endpoint
from ...errors import EndpointError

IGNORE_EOS: dict[str, Any] = {"ignore_eos": True}
"""vLLM's sampling option: keep writing past the end of message (a fixed length)."""


class Summarised:
    """A probe measurement as ``summary.json`` records it: the fields and properties named."""

    SUMMARY: ClassVar[tuple[str, ...]] = ()
    """What :meth:`as_dict` writes, in this order."""

    def as_dict(self) -> dict[str, Any]:
        """The measurement for ``summary.json``."""
        out = {name: getattr(self, name) for name in self.SUMMARY}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


@dataclass(frozen=True)
class Stream:
    """One streamed request's timing."""

    ttft_s: float
    """Seconds to its first text (queueing and prefill)."""
    decode_s: float
    """Seconds from its first text to its end."""
    tokens: int
    """Tokens it generated (the server's count)."""

    @property
    def step_s(self) -> float:
        """Decode seconds per token after the first."""
        return self.decode_s / max(1, self.tokens - 1)


@dataclass(frozen=True)
class Decode(Summarised):
    """``concurrency`` streams run together."""

    SUMMARY = (
        "concurrency",
        "step_s",
        "tok_s",
        "aggregate_tok_s",
        "ttft_s",
        "wall_s",
        "tokens",
        "repeats",
        "step_s_slowest",
        "spread",
        "stream_tokens",
    )

    concurrency: int
    step_s: float
    """Decode seconds per token of one stream, weighted by tokens (:func:`batch_step`): one
    decode step of the batch."""
    ttft_s: float
    """Mean seconds to the first text."""
    wall_s: float
    """Seconds from the start to the last stream's end."""
    tokens: int
    """Tokens generated by all the streams."""
    repeats: int = 1
    """How many times the measurement ran (this is the fastest of them)."""
    step_s_slowest: float | None = None
    """The slowest repeat's :attr:`step_s` (``None``: one repeat)."""
    stream_tokens: tuple[int, ...] = ()
    """Tokens each stream generated, in the order sent (natural lengths differ)."""

    @property
    def spread(self) -> float | None:
        """Relative spread over the repeats: slowest step over fastest, minus 1.

        ``None`` with one repeat (the noise is then unknown).
        """
        if self.repeats < 2 or self.step_s_slowest is None or self.step_s <= 0:
            return None
        return self.step_s_slowest / self.step_s - 1.0

    @property
    def tok_s(self) -> float:
        """Tokens a second of one stream."""
        return 1.0 / self.step_s

    @property
    def aggregate_tok_s(self) -> float:
        """Tokens a second of all the streams together."""
        return self.concurrency / self.step_s


def decode_request(
    prompt: list[dict[str, Any]], max_tokens: int, *, ignore_eos: bool = False
) -> ChatRequest:
    """A greedy request of at most ``max_tokens`` tokens, ending where the answer ends.

    With ``ignore_eos`` it writes exactly ``max_tokens`` tokens (the old fixed length).
    """
    extra = dict(IGNORE_EOS) if ignore_eos else None
    return ChatRequest(prompt, max_tokens, temperature=0.0, extra_body=extra)


async def timed_stream(endpoint: Endpoint, request: ChatRequest) -> Stream:
    """Stream ``request`` and time it."""
    start = time.perf_counter()
    first: float | None = None
    tokens = 0
    async for item in endpoint.stream(request):
        if item.text and first is None:
            first = time.perf_counter()
        tokens = max(tokens, item.completion_tokens)
    end = time.perf_counter()
    where = getattr(endpoint, "base_url", "")
    if first is None:
        raise EndpointError(endpoint.name, where, "the server streamed no text to time")
    if tokens < 1:
        raise EndpointError(
            endpoint.name,
            where,
            "the server reported no completion tokens in the stream's usage (a decode speed "
            "counts the server's tokens)",
        )
    return Stream(first - start, end - first, tokens)


def batch_step(streams: Sequence[Stream]) -> float:
    """The streams' decode seconds over their tokens after the first (weighted by tokens).

    Streams of equal length give the mean of their :attr:`Stream.step_s`; of different
    lengths, each counts by the tokens it wrote, so a short answer does not weigh as much as a
    long one (the summed latency of the requests is what a load's speed-up compares).
    """
    steps = sum(max(1, s.tokens - 1) for s in streams)
    return sum(s.decode_s for s in streams) / steps


async def decode(
    endpoint: Endpoint,
    prompts: Sequence[list[dict[str, Any]]],
    concurrency: int,
    max_tokens: int,
    *,
    ignore_eos: bool = False,
) -> Decode:
    """``concurrency`` requests at once, stream ``i`` on prompt ``i`` (in turn), timed.

    Each ends where its answer ends, at most ``max_tokens`` (``ignore_eos``: exactly).
    """
    requests = [
        decode_request(prompts[i % len(prompts)], max_tokens, ignore_eos=ignore_eos)
        for i in range(concurrency)
    ]
    start = time.perf_counter()
    streams = await asyncio.gather(*(timed_stream(endpoint, r) for r in requests))
    wall = time.perf_counter() - start
    return Decode(
        concurrency,
        step_s=batch_step(streams),
        ttft_s=sum(s.ttft_s for s in streams) / len(streams),
        wall_s=wall,
        tokens=sum(s.tokens for s in streams),
        stream_tokens=tuple(s.tokens for s in streams),
    )


def fastest(measured: Sequence[Decode]) -> Decode:
    """The repeat with the shortest decode step (the least disturbed on a shared machine).

    It carries how many repeats ran and the slowest one's step (:attr:`Decode.spread`).
    """
    best = min(measured, key=lambda d: d.step_s)
    slowest = max(d.step_s for d in measured)
    return replace(best, repeats=len(measured), step_s_slowest=slowest)


@dataclass(frozen=True)
class Prefill(Summarised):
    """One request of one generated token: how fast its prompt was read."""

    SUMMARY = ("prompt_tokens", "cached_tokens", "seconds", "tok_s")

    prompt_tokens: int
    cached_tokens: int | None
    """Prompt tokens the server read from its prefix cache (``None``: not reported)."""
    seconds: float

    @property
    def tok_s(self) -> float:
        """Prompt tokens a second, cached ones included."""
        return self.prompt_tokens / self.seconds if self.seconds > 0 else 0.0


def long_text(texts: Sequence[str], tokens: int) -> str:
    """About ``tokens`` tokens of text (four characters a token), the texts repeated."""
    out: list[str] = []
    while sum(len(t) for t in out) < 4 * tokens:
        out.extend(texts)
    return "\n\n".join(out)[: 4 * tokens]


async def prefill(endpoint: Endpoint, texts: Sequence[str], tokens: int) -> tuple[Prefill, Prefill]:
    """``(cold, cached)``: a fresh prompt of about ``tokens`` tokens, then its prefix again."""
    body = f"[probe {uuid.uuid4().hex}]\n\n{long_text(texts, tokens)}\n\n"
    out = []
    for question in ("How many questions are above?", "Which question is the longest?"):
        request = ChatRequest([{"role": "user", "content": body + question}], 1, temperature=0.0)
        done = await endpoint.complete(request)
        out.append(Prefill(done.prompt_tokens, done.cached_tokens, done.seconds))
    return out[0], out[1]
