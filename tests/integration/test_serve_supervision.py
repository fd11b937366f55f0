"""`specreason serve` supervises its servers: a killed draft server is restarted while the base
keeps serving, and a run through ChatSpecReason rides through the outage on the base model.
Also: a memory plan that cannot fit is refused in seconds, before any process starts."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import httpx
import psutil
import pytest

from langchain_specreason import ChatSpecReason
from tests.conftest import LOG_DIR, left_running, start_serve
from tests.helpers import OUTAGE, QUESTION, TINY_PAIR

pytestmark = pytest.mark.integration

DRAFT_PORT, BASE_PORT = 8161, 8162
# TINY_PAIR: both servers the 135M with 256 MiB of KV cache (about 6 GiB planned): what is
# tested is the supervisor, not answers, beside the shared pair on a 24 GB machine.


def _server(serve_pid: int, port: int) -> psutil.Process:
    for child in psutil.Process(serve_pid).children():
        try:
            args = child.cmdline()
        except psutil.Error:
            continue
        if "--port" in args and args[args.index("--port") + 1] == str(port):
            return child
    raise AssertionError(f"no server on port {port}")


def test_a_plan_that_cannot_fit_is_refused_in_seconds_and_starts_nothing(tmp_path):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    start = time.monotonic()
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "langchain_specreason.cli", "serve", "--profile", "cpu"),
            *("--replicas", "3", "--log-dir", str(tmp_path)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    spawned: set[int] = set()
    while proc.poll() is None and time.monotonic() - start < 30:
        # any process the CLI starts shows up as its child
        spawned |= {p.pid for p in psutil.Process(proc.pid).children(recursive=True)}
        time.sleep(0.05)
    out, err = proc.communicate(timeout=5)
    assert time.monotonic() - start < 30
    assert proc.returncode == 2
    assert "error: not enough memory: the plan needs 55.0 GiB" in err
    assert "--replicas 2" in err and "--only" in err
    assert spawned == set() and out == ""
    assert list(tmp_path.iterdir()) == []  # no server log was even opened
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before | {proc.pid}


@pytest.mark.after_shutdown  # two more servers: after the session's pair stopped
async def test_a_killed_draft_server_is_restarted_while_the_run_answers_on_the_base():
    free = psutil.virtual_memory().available / 2**30
    if free < 8:
        raise RuntimeError(f"this test starts 2 servers (~6 GiB planned); {free:.1f} GB free")
    serve = start_serve(
        "cpu-test",
        "--draft-port",
        str(DRAFT_PORT),
        "--base-port",
        str(BASE_PORT),
        *TINY_PAIR,
        log_dir=LOG_DIR / "supervision",
        name="serve-supervised",
    )
    try:
        base_pid = _server(serve.proc.pid, BASE_PORT).pid
        llm = ChatSpecReason(
            draft_url=serve.urls["draft"],
            base_url=serve.urls["base"],
            **OUTAGE,
            max_retries=0,
            connect_timeout=2,
        )
        chunks = []
        async for chunk in llm.astream(QUESTION):
            chunks.append(chunk)
            if len(chunks) == 1:  # the first step is in: the draft server dies
                os.killpg(_server(serve.proc.pid, DRAFT_PORT).pid, signal.SIGKILL)
        total = chunks[0]
        for chunk in chunks[1:]:
            total += chunk
        stats = total.response_metadata["specreason"]
        assert total.content.strip()
        assert stats["draft_down"].startswith(f"draft endpoint at {serve.urls['draft']}: ")
        assert stats["steps_base"] >= 1
        # serve kept the base up (same process) and brings the draft back on its port
        assert serve.proc.poll() is None
        assert _server(serve.proc.pid, BASE_PORT).pid == base_pid
        deadline = time.monotonic() + 900
        err = ""
        while "is serving again" not in err:
            assert serve.proc.poll() is None, err
            assert time.monotonic() < deadline, err
            time.sleep(2)
            err = serve.stderr_path.read_text()
        assert f"draft ({serve.urls['draft']}) exited with code -9; restarting it" in err
        answer = httpx.post(
            serve.urls["draft"] + "/chat/completions",
            json={
                "model": "smollm2-135m",
                "messages": [{"role": "user", "content": "Say hi."}],
                "max_tokens": 3,
            },
            timeout=120,
        )
        assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["content"]
    finally:
        pids = serve.server_pids()
        names = {}
        for pid in pids:
            with contextlib.suppress(psutil.Error):
                names[pid] = " ".join(psutil.Process(pid).cmdline()[:3])
        if serve.proc.poll() is None:
            assert serve.interrupt() == 130
        # a loaded 2-core machine can take a while to reap a worker of several GB
        left = left_running(pids, timeout=90)
        assert left == [], {pid: names.get(pid) for pid in left}
