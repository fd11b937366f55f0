"""Replica pools behind vllm-router: affinity by routing key, failover, start and stop.

Two parts:

- the real ``vllm-router`` through the Launcher's replica path, in front of tiny stub
  OpenAI servers (seconds, a few MB): where requests land, what the router forwards, a
  replica killed under it;
- ``specreason serve --profile cpu-test --replicas 2`` on real vLLM servers (4 servers of
  the 135M, see ``TINY_PAIR``): the base prefix-cache hit rate of one ChatSpecReason run's judge
  calls per replica (each replica's own ``/metrics``) with the routing key, without it, and on
  one server alone;
  one replica of each role killed mid-run; Ctrl-C. These run after the session's pair is
  stopped (marker ``after_shutdown``): the two sets of servers do not fit in 24 GB together.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx2
import psutil
import pytest

from langchain_specreason import ChatRequest, ChatSpecReason, OpenAIEndpoint
from langchain_specreason.endpoint.routing import routing_headers, routing_key
from langchain_specreason.lab.bench.metrics import CACHE_HITS, CACHE_QUERIES, REQUESTS, scrape
from langchain_specreason.serving import launcher as launcher_module
from langchain_specreason.serving.launcher import Launcher, check_port_free
from langchain_specreason.serving.profiles import load_profile
from langchain_specreason.serving.replicas import RouterSpec, router_command
from tests.conftest import LOG_DIR, ServeProcess, left_running, start_serve
from tests.helpers import TINY_PAIR

pytestmark = pytest.mark.integration


class _Keyed(httpx2.AsyncBaseTransport):
    """Adds the run's routing headers to every request, as OpenAIEndpoint will itself.

    One connection pool per event loop: the chat model also calls from its sync bridge's loop.
    """

    def __init__(self) -> None:
        self._inner: dict[asyncio.AbstractEventLoop, httpx2.AsyncHTTPTransport] = {}

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        for name, value in routing_headers().items():
            request.headers[name] = value
        loop = asyncio.get_running_loop()
        inner = self._inner.setdefault(loop, httpx2.AsyncHTTPTransport())
        return await inner.handle_async_request(request)

    async def aclose(self) -> None:
        inner = self._inner.pop(asyncio.get_running_loop(), None)
        if inner is not None:
            await inner.aclose()


def _endpoint(url: str, name: str, **kwargs) -> OpenAIEndpoint:
    return OpenAIEndpoint(url, name=name, transport=_Keyed(), **kwargs)


# --- the router in front of stub replicas ---------------------------------------------------

STUB = r"""
import json, os, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port = int(sys.argv[1])
key = os.environ.get("VLLM_API_KEY")  # checked on /v1 as vLLM does


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _send(self, obj, status=200):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if key and self.path.startswith("/v1") and (
            self.headers.get("authorization") != f"Bearer {key}"
        ):
            return self._send({"error": "Unauthorized"}, 401)
        models = {"object": "list", "data": [{"id": "stub", "object": "model"}]}
        self._send(models if self.path == "/v1/models" else {})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        seen = {"port": port, "auth": self.headers.get("authorization"),
                "key": self.headers.get("x-session-id")}
        self._send({"id": "x", "object": "chat.completion", "created": 0, "model": "stub",
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {
                        "role": "assistant", "content": json.dumps(seen)}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})


ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


async def test_router_pins_a_key_to_one_replica_forwards_the_key_and_fails_over(
    monkeypatch, tmp_path, capsys
):
    monkeypatch.setattr(
        launcher_module,
        "server_command",
        lambda spec, device: [sys.executable, "-c", STUB, str(spec.port)],
    )
    profile = load_profile("cpu-test", draft_port=8151, base_port=8152)
    launcher = Launcher(
        profile,
        log_dir=tmp_path,
        replicas=2,
        replica_port=8251,
        startup_timeout=120,
        api_key="sk-stub",
        max_restarts=0,  # a replica that exits is dropped at once, not restarted
    )
    with launcher:
        assert launcher.urls == {
            "draft": "http://127.0.0.1:8151/v1",
            "base": "http://127.0.0.1:8152/v1",
        }
        base = _endpoint(launcher.urls["base"], "base", api_key="sk-stub", max_retries=0)

        async def landed(key: str | None) -> dict:
            with routing_key(key):
                done = await base.complete(ChatRequest([{"role": "user", "content": "hi"}], 4))
            return json.loads(done.text)

        # the router's key guard: every route, admin ones included, wants the replicas' key
        for url in launcher.urls.values():
            root = url.removesuffix("/v1")
            for key in (None, "sk-wrong"):
                headers = {"Authorization": f"Bearer {key}"} if key else {}
                async with httpx2.AsyncClient(headers=headers, timeout=10) as client:
                    for method, path in [
                        ("GET", "/workers"),
                        ("GET", "/v1/models"),
                        ("POST", "/add_worker?url=http://127.0.0.1:9"),
                        ("POST", "/remove_worker?url=http://127.0.0.1:8253"),
                        ("POST", "/flush_cache"),
                    ]:
                        answer = await client.request(method, root + path)
                        assert answer.status_code == 401, (key, method, path)
            async with httpx2.AsyncClient(
                headers={"Authorization": "Bearer sk-stub"}, timeout=10
            ) as client:
                listed = (await client.get(root + "/workers")).json()
            assert len(listed["workers"]) == 2  # nothing was added or removed

        first = await landed("run-1")
        assert first["auth"] == "Bearer sk-stub"  # the client's key reaches the replica
        assert first["key"] == "run-1"
        assert {(await landed("run-1"))["port"] for _ in range(8)} == {first["port"]}
        spread = {(await landed(f"run-{i}"))["port"] for i in range(2, 12)}
        assert spread == {8253, 8254}  # ten keys: both base replicas used

        # kill the replica that serves run-1: its next calls go to the other replica
        (victim,) = [r for r in launcher._running if r.url.endswith(f":{first['port']}/v1")]
        os.killpg(victim.proc.pid, signal.SIGKILL)
        victim.proc.wait(timeout=10)
        after = [await landed("run-1") for _ in range(3)]
        assert {a["port"] for a in after} == {8253, 8254} - {first["port"]}
        launcher.supervise()  # one replica down is not an error: dropped, the other serves
        assert (
            f"base replica {first['port'] - 8252} (http://127.0.0.1:{first['port']}/v1) "
            "exited" in capsys.readouterr().err
        )
    for port in range(8251, 8257):
        check_port_free("127.0.0.1", port)
    for port in (8151, 8152):
        check_port_free("127.0.0.1", port)


# --- real vLLM servers ----------------------------------------------------------------------

# What these tests measure is routing, caching and failover, not answers: TINY_PAIR has the
# draft model serve the base pools too, and every replica gets 256 MiB of KV cache (about
# 5,800 tokens of the 135M at 45 KiB a token; one full 4096-token sequence fits). Four cpu-test
# servers with the profile's models took 20.7 GiB (serve/README.md): more than a 24 GB CI
# machine had free.
NEEDED_GB = 14.0
"""Refuse to start below this: measured 11.7 GiB PSS for the tree after start (available
memory 22.3 GB before, 11.1 GB after; ``runs/test-logs/replicas.json``)."""
DRAFT_PORT, BASE_PORT, FIRST = 8141, 8142, 8241
REPLICAS = {
    "draft": [f"http://127.0.0.1:{FIRST + i}/v1" for i in range(2)],
    "base": [f"http://127.0.0.1:{FIRST + 2 + i}/v1" for i in range(2)],
}
REPORT = LOG_DIR / "replicas.json"
QUESTION = "A farmer has 17 sheep and buys 3 more pens of 4 sheep each. How many sheep now?"


@dataclass
class Pool:
    serve: ServeProcess
    report: dict


def _rss_gb(serve: ServeProcess) -> float:
    total = 0
    for pid in [serve.proc.pid, *serve.server_pids()]:
        with contextlib.suppress(psutil.Error):
            total += psutil.Process(pid).memory_full_info().pss
    return total / 2**30


@pytest.fixture(scope="module")
def pool() -> Iterator[Pool]:
    free = psutil.virtual_memory().available / 2**30
    if free < NEEDED_GB:
        raise RuntimeError(
            f"4 cpu-test servers need about {NEEDED_GB:.0f} GB; {free:.1f} GB "
            "available (stop other servers first)"
        )
    serve = start_serve(
        "cpu-test",
        "--replicas",
        "2",
        "--draft-port",
        str(DRAFT_PORT),
        "--base-port",
        str(BASE_PORT),
        "--replica-port",
        str(FIRST),
        *TINY_PAIR,
        log_dir=LOG_DIR / "replicas",
        timeout=1800.0,
        name="serve-replicas",
    )
    report: dict = {
        "pss_gb_after_start": round(_rss_gb(serve), 2),
        "available_gb_before_start": round(free, 2),
        "available_gb_after_start": round(psutil.virtual_memory().available / 2**30, 2),
    }
    try:
        yield Pool(serve, report)
    finally:
        REPORT.write_text(json.dumps(report, indent=2))
        if serve.proc.poll() is None:
            serve.interrupt()


async def _counters(urls: list[str]) -> list[dict[str, float]]:
    pages = await asyncio.gather(*(scrape(u) for u in urls))
    return [{k: c[k] for k in (REQUESTS, CACHE_QUERIES, CACHE_HITS)} for c in pages]


async def _reset_caches() -> None:
    for url in REPLICAS["draft"] + REPLICAS["base"]:
        assert await OpenAIEndpoint(url).reset_prefix_cache() is True


def _model(draft_url: str, base_url: str, budget: int = 96) -> ChatSpecReason:
    return ChatSpecReason(
        draft_endpoint=_endpoint(draft_url, "draft"),
        base_endpoint=_endpoint(base_url, "base"),
        judge="score",
        temperature=0,
        seed=0,
        budget=budget,
        step_max_tokens=24,
        answer_max_tokens=24,  # not max_tokens: that would bound the reasoning too
    )


async def _measured_run(draft_url: str, base_url: str, key: str | None) -> dict:
    """One run after emptying every cache: what each base replica saw of it."""
    await _reset_caches()
    before = await _counters(REPLICAS["base"])
    with routing_key(key):
        msg = await _model(draft_url, base_url).ainvoke(QUESTION)
    after = await _counters(REPLICAS["base"])
    per = [{k: a[k] - b[k] for k in a} for a, b in zip(after, before, strict=True)]
    queries = sum(p[CACHE_QUERIES] for p in per)
    hits = sum(p[CACHE_HITS] for p in per)
    stats = msg.response_metadata["specreason"]
    return {
        "judge_calls": stats["judge_calls"],
        "requests_per_replica": [int(p[REQUESTS]) for p in per],
        # every base request of the run, as the replicas counted them
        "hit_rate": round(hits / queries, 3) if queries else None,
        "hits_per_replica": [int(p[CACHE_HITS]) for p in per],
        "queries_per_replica": [int(p[CACHE_QUERIES]) for p in per],
        # the judge calls only, as the responses reported them (cached_tokens)
        "judge_hit_rate": round(stats["judge_cached_tokens"] / stats["judge_prompt_tokens"], 3)
        if stats["judge_prompt_tokens"]
        else None,
        "answer": msg.content,
    }


@contextlib.contextmanager
def _round_robin_router(port: int, metrics_port: int) -> Iterator[str]:
    """A second vllm-router over the base replicas, round robin: a run's calls scatter."""
    spec = RouterSpec(
        role="base",
        port=port,
        metrics_port=metrics_port,
        policy="round_robin",
        workers=tuple(u.removesuffix("/v1") for u in REPLICAS["base"]),
    )
    with (LOG_DIR / "replicas" / "round-robin-router.log").open("wb") as log:
        proc = subprocess.Popen(
            router_command(spec), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx2.HTTPError):
                if httpx2.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            assert proc.poll() is None and time.monotonic() < deadline, "round robin router"
            time.sleep(0.5)
        yield spec.url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.mark.after_shutdown
async def test_a_runs_calls_stay_on_one_replica_and_keep_its_prefix_cache(pool):
    router = {"draft": pool.serve.urls["draft"], "base": pool.serve.urls["base"]}
    assert router == {
        "draft": f"http://127.0.0.1:{DRAFT_PORT}/v1",
        "base": f"http://127.0.0.1:{BASE_PORT}/v1",
    }
    keyed = await _measured_run(router["draft"], router["base"], "run-keyed")
    # no key of ours: ChatSpecReason sets a fresh one per run itself, which pins the run too
    # (a request with no key at all: vllm-router 0.1.17 hashes an empty text for chat
    # requests, "request:" in its log, so all of them go to one replica)
    unkeyed = await _measured_run(router["draft"], router["base"], None)
    with _round_robin_router(BASE_PORT + 6, FIRST + 7) as round_robin:
        scattered = await _measured_run(router["draft"], round_robin, None)
    # one server alone: straight to base replica 1, no router
    alone = await _measured_run(REPLICAS["draft"][0], REPLICAS["base"][0], None)
    # different keys (runs) spread over the replicas: 8 one-token calls
    base = _endpoint(router["base"], "base")
    before = await _counters(REPLICAS["base"])
    for i in range(8):
        with routing_key(f"run-{i}"):
            await base.complete(ChatRequest([{"role": "user", "content": "Hi"}], 1))
    after = await _counters(REPLICAS["base"])
    spread = [int(a[REQUESTS] - b[REQUESTS]) for a, b in zip(after, before, strict=True)]
    pool.report["affinity"] = {
        "keyed": keyed,
        "unkeyed": unkeyed,
        "round_robin": scattered,
        "one_server": alone,
        "eight_keys_per_replica": spread,
    }
    print(json.dumps(pool.report["affinity"], indent=2))
    assert keyed["judge_calls"] >= 2
    assert sorted(keyed["requests_per_replica"])[0] == 0  # every base call on one replica
    assert sorted(unkeyed["requests_per_replica"])[0] == 0  # ... and with the run's own key
    # the same calls in the same order on one emptied cache: the same hits as one server
    assert keyed["hit_rate"] == pytest.approx(alone["hit_rate"], abs=0.02)
    # round robin scatters a run over both replicas: each misses what the other cached
    assert min(scattered["requests_per_replica"]) > 0
    assert keyed["hit_rate"] > scattered["hit_rate"]
    assert min(spread) > 0 and sum(spread) == 8  # runs with keys share the pool


def _group_leader(serve: ServeProcess, url: str) -> psutil.Process:
    port = url.rsplit(":", 1)[1].split("/")[0]
    for child in psutil.Process(serve.proc.pid).children():
        try:
            args = child.cmdline()
        except psutil.Error:  # a replica killed before, not yet reaped
            continue
        if (
            "--port" in args
            and args[args.index("--port") + 1] == port
            and "vllm" in " ".join(args[:3])
        ):
            return child
    raise AssertionError(f"no server process on port {port}")


@pytest.mark.after_shutdown
async def test_killing_one_replica_of_each_role_mid_run_still_gives_the_answer(pool):
    await _reset_caches()
    before = {role: await _counters(urls) for role, urls in REPLICAS.items()}
    model = _model(pool.serve.urls["draft"], pool.serve.urls["base"], budget=192)
    with routing_key("run-failover"):
        run = asyncio.ensure_future(model.ainvoke(QUESTION))
    # wait until the run has reached both pools, then kill the replica serving it in each
    killed: dict[str, str] = {}
    deadline = time.monotonic() + 600
    while len(killed) < 2 and not run.done() and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        for role, urls in REPLICAS.items():
            if role in killed:
                continue
            now = await _counters(urls)
            busy = [
                u
                for u, a, b in zip(urls, now, before[role], strict=True)
                if a[REQUESTS] > b[REQUESTS]
            ]
            if busy:
                leader = _group_leader(pool.serve, busy[0])
                os.killpg(leader.pid, signal.SIGKILL)
                killed[role] = busy[0]
    assert set(killed) == {"draft", "base"}, f"the run ended before both kills: {killed}"
    started = time.monotonic()
    msg = await asyncio.wait_for(run, timeout=900)
    stats = msg.response_metadata["specreason"]
    pool.report["failover"] = {
        "killed": killed,
        "seconds_after_kill": round(time.monotonic() - started, 1),
        "steps_drafted": stats["steps_drafted"],
        "answer": msg.content,
    }
    assert msg.content.strip()
    assert pool.serve.proc.poll() is None  # `specreason serve` keeps serving
    # serve reports each exit on its next supervision pass: wait for both lines
    wanted = [f"({url}) exited with code" for url in killed.values()]
    deadline = time.monotonic() + 900  # after the other's restart, which can take minutes
    err = pool.serve.stderr_path.read_text()
    while not all(w in err for w in wanted) and time.monotonic() < deadline:
        time.sleep(1)
        err = pool.serve.stderr_path.read_text()
    for role, url in killed.items():
        assert f"({url}) exited with code" in err and f"{role} replica" in err, err
    # the other replica of each role answers through the router
    survivors = {role: [u for u in urls if u != killed[role]] for role, urls in REPLICAS.items()}
    for role in ("draft", "base"):
        (alive,) = survivors[role]
        assert (await _counters([alive]))[0][REQUESTS] > 0


@pytest.mark.after_shutdown
def test_ctrl_c_stops_the_routers_and_every_replica(pool):
    pool.report["pss_gb_before_stop"] = round(_rss_gb(pool.serve), 2)
    pool.report["available_gb_before_stop"] = round(psutil.virtual_memory().available / 2**30, 2)
    pids = pool.serve.server_pids()
    assert len(pids) >= 4  # routers and the replicas left, with vLLM's engine processes
    assert pool.serve.interrupt() == 130
    assert left_running(pids) == []
    for port in [DRAFT_PORT, BASE_PORT, *range(FIRST, FIRST + 6)]:
        check_port_free("127.0.0.1", port)
