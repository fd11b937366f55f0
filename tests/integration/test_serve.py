"""The serving stack against real vLLM CPU servers: the session pair, and the CLI's errors."""

from __future__ import annotations

import json
import socket

import pytest

from langchain_specreason import ChatRequest, OpenAIEndpoint
from langchain_specreason.serving.launcher import check_port_free
from tests.conftest import left_running
from tests.helpers import cli

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("role", ["draft", "base"])
async def test_both_servers_answer_a_chat_completion(servers, role):
    url = servers.draft_url if role == "draft" else servers.base_url
    assert url.endswith("/v1")
    endpoint = OpenAIEndpoint(url, name=role)
    done = await endpoint.complete(
        ChatRequest([{"role": "user", "content": "Say hello in one word."}], max_tokens=5)
    )
    assert done.text.strip()
    assert 1 <= done.completion_tokens <= 5
    assert done.prompt_tokens > 5


def serve_draft(port: int, log_dir, *more: str):
    """`specreason serve --profile cpu-test --only draft` on ``port``, logs in ``log_dir``."""
    return cli(
        *("serve", "--profile", "cpu-test", "--only", "draft", "--draft-port", str(port)),
        *("--log-dir", str(log_dir), *more),
        timeout=300,
    )


def test_unknown_profile_is_one_line_exit_2():
    proc = cli("serve", "--profile", "nope", timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "error: unknown profile 'nope'; known profiles: cpu, cpu-test, gpu-1x, gpu-2x"
    )


def test_port_in_use_is_one_line_exit_2(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        proc = serve_draft(port, tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[-1] == (
        f"error: port {port} on 127.0.0.1 is already in use; stop what listens "
        "there or pick another port (--draft-port / --base-port)"
    )


def test_server_dying_during_startup_is_one_line_exit_2(tmp_path):
    # the base's port moved to a free one: the draft started alone gets both roles' cores
    more = ("--draft-model", str(tmp_path / "no-such-model"), "--base-port", "8192")
    proc = serve_draft(8191, tmp_path, *more)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: draft server (no-such-model) exited with code")
    assert f"(full log: {tmp_path / 'draft.log'})" in last
    assert (tmp_path / "draft.log").read_text().strip()
    check_port_free("127.0.0.1", 8191)  # nothing left listening
    assert "cores: draft on cores 0-1" in proc.stderr
    meta = json.loads((tmp_path / "meta.json").read_text())["servers"]["draft"]
    assert (meta["cores"], meta["env"]["VLLM_CPU_OMP_THREADS_BIND"]) == ("0-1", "0-1")


@pytest.mark.shutdown
def test_ctrl_c_stops_every_server_process_and_frees_the_ports(servers):
    """Runs last: interrupts the session's `specreason serve` as Ctrl-C in a terminal would."""
    serve = servers.serve
    if serve is None:  # external servers: start our own pair on other ports for this check
        from tests.conftest import start_serve

        serve = start_serve("cpu-test", "--draft-port", "8121", "--base-port", "8122")
    pids = serve.server_pids()
    assert len(pids) >= 2  # both API servers, plus vLLM's engine processes
    ports = [int(url.rsplit(":", 1)[1].split("/")[0]) for url in serve.urls.values()]
    code = serve.interrupt()
    assert code == 130
    assert left_running(pids) == []
    for port in ports:
        check_port_free("127.0.0.1", port)  # raises PortInUseError if still listening
