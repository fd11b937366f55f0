"""The examples/ scripts, run as a user would (their main()), against the real servers."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from langchain_specreason import SpecReasonConfig

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FAKE_KEY = "sk-example-key-must-never-be-printed-0123456789"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def example_env(servers, monkeypatch):
    """The session's servers in the variables the examples read; tracing stays local."""
    monkeypatch.syspath_prepend(str(EXAMPLES))  # `from _servers import ...`
    monkeypatch.setenv("SPECREASON_DRAFT_URL", servers.draft_url)
    monkeypatch.setenv("SPECREASON_BASE_URL", servers.base_url)
    monkeypatch.setenv("SPECREASON_FAMILY", servers.family)
    for var in (
        "LANGSMITH_TRACING",
        "LANGCHAIN_TRACING_V2",
        "LANGSMITH_API_KEY",
        "LANGCHAIN_API_KEY",
    ):
        monkeypatch.delenv(var, raising=False)
    return servers


def test_examples_have_a_docstring_and_main():
    for path in sorted(EXAMPLES.glob("[!_]*.py")):
        source = path.read_text()
        assert source.startswith('"""'), f"{path.name} has no module docstring"
        assert f"python examples/{path.name}" in source, f"{path.name} does not say how to run"
        assert "def main(" in source and "sys.exit(main(" in source, path.name
        assert "from _servers import" in source, f"{path.name} does not use _servers.py"


def test_servers_helper_uses_the_environment(example_env, monkeypatch):
    from _servers import servers

    with servers() as srv:
        assert (srv.draft_url, srv.base_url) == (example_env.draft_url, example_env.base_url)
        assert srv.family == example_env.family
    monkeypatch.delenv("SPECREASON_BASE_URL")
    with pytest.raises(SystemExit, match="set both SPECREASON_DRAFT_URL and"), servers():
        pass


def test_chain_invokes_and_batches(example_env, capsys):
    chain = load("chain")
    assert chain.main() == 0
    out = capsys.readouterr().out
    answers = re.findall(r"^  A: (.*)$", out, flags=re.M)
    assert len(answers) == 1 + len(chain.BATCH)  # invoke, then both batched inputs
    assert all(a.strip() for a in answers), out
    for question in [chain.QUESTION, *chain.BATCH]:
        assert f"Q: {question}" in out


def test_chain_runs_as_a_user_types_it(servers):
    """`python examples/chain.py` from the repo root, in a fresh interpreter."""
    env = {
        **os.environ,
        "SPECREASON_DRAFT_URL": servers.draft_url,
        "SPECREASON_BASE_URL": servers.base_url,
    }
    done = subprocess.run(
        [sys.executable, "examples/chain.py"],
        cwd=EXAMPLES.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(re.findall(r"^  A: \S", done.stdout, flags=re.M)) == 3, done.stdout


def test_rag_retrieves_the_passage_that_holds_the_fact(example_env, capsys):
    rag = load("rag")
    assert rag.main("How long is the Orrin Bridge?") == 0
    out = capsys.readouterr().out
    # only doc-4 mentions the bridge; the models cannot know a made-up length
    assert re.search(r"^retrieved: doc-4 ", out, flags=re.M), out
    answer = re.search(r"^answer: (.*)$", out, flags=re.M)
    assert answer and answer.group(1).strip(), out
    assert "doc-4" in answer.group(1) or "412" in answer.group(1), out


def test_rag_retrieval_picks_other_passages_too(example_env):
    rag = load("rag")
    store = rag.build_store()
    for question, doc_id in [
        ("Which telescope watches comets at Hollow Pines?", "doc-5"),
        ("What does the Brask glass beetle eat?", "doc-3"),
    ]:
        assert store.similarity_search(question, k=1)[0].id == doc_id


def test_tracing_collects_judge_runs_with_step_metadata(example_env, monkeypatch, capsys):
    monkeypatch.setenv("SPECREASON_BASE_API_KEY", FAKE_KEY)  # vLLM without --api-key ignores it
    tracing = load("tracing")
    assert tracing.main() == 0
    out = capsys.readouterr().out
    assert "LangSmith tracing: off" in out
    assert FAKE_KEY not in out
    lines = out.splitlines()
    tree = lines[lines.index("ChatSpecReason") :]  # the root run, then its descendants
    assert tree[1] == "  specreason", out
    judges = [
        re.fullmatch(r"( +)judge_step  step=(\d+)  call=judge  score=(\S+) decision=(\w+)", line)
        for line in tree
    ]
    judges = [m for m in judges if m]
    assert judges, out
    threshold = SpecReasonConfig().likelihood_threshold  # the default judge decides on it
    for match in judges:
        assert len(match.group(1)) > 2  # nested under the graph's run, inside its judge node
        score = float(match.group(3))  # a log-probability (or the arithmetic check's reject)
        assert score <= 0
        assert match.group(4) == ("accepted" if score >= threshold else "rewritten")
    steps = [int(m.group(2)) for m in judges]
    assert steps[0] == 0 and steps == sorted(steps)
    assert re.search(r"^ +draft_step  step=0  call=draft  tokens=\d+$", out, flags=re.M), out


def test_tracing_runs_carry_no_api_key(example_env, monkeypatch):
    monkeypatch.setenv("SPECREASON_BASE_API_KEY", FAKE_KEY)
    from langchain_core.tracers.context import collect_runs

    from langchain_specreason import ChatSpecReason

    tracing = load("tracing")
    llm = ChatSpecReason(**{**tracing.SHORT, "budget": 16, "max_tokens": 8})
    with collect_runs() as collector:
        llm.invoke("1+1?", config={"callbacks": [collector]})
    runs = [run for root in collector.traced_runs for _, run in tracing.walk(root)]
    names = {run.name for run in runs}
    assert {"ChatSpecReason", "specreason", "draft_step", "judge_step"} <= names, names
    for run in runs:
        assert FAKE_KEY not in run.model_dump_json(), run.name


def test_live_steps_shows_steps_and_speed_up(example_env, capsys):
    live = load("live_steps")
    assert live.main() == 0
    out = capsys.readouterr().out
    assert "SpecReason steps" in out
    rows = re.findall(r"^\S\s+(\d+)\s+\S\s+(accepted|rewritten|base)\b", out, flags=re.M)
    assert any(status in ("accepted", "rewritten") for _, status in rows), out
    assert re.search(
        r"^speed-up: \d+\.\d\dx \(SpecReason \d+\.\d s, base model alone "
        r"\d+\.\d s\)$",
        out,
        flags=re.M,
    ), out
    assert "base model alone" in out


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))


def test_agent_node_calls_the_tool_and_streams_the_subgraph(example_env, capsys):
    agent_node = load("agent_node")
    assert agent_node.main() == 0
    out = capsys.readouterr().out
    call = r"tool call: calculator\(\{'expression': '123 ?\* ?456'\}\) -> 56088"
    assert re.search(call, out), out
    subgraph_steps = re.findall(
        r"^  specreason step \d+ (accepted|rewritten|base):", out, flags=re.M
    )
    assert subgraph_steps, out  # steps streamed from inside the subgraph node
    assert "parent's last message: [report]" in out
