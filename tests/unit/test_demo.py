"""`specreason demo` with fakes: what it runs (the measured setting, then `sd`) and what it says."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from langchain_specreason.baselines import SingleModelRun
from langchain_specreason.cli import demo, main
from langchain_specreason.cli.demo import (
    MEASURED,
    NOT_A_BENCHMARK,
    VERDICTS,
    Answered,
    summary_lines,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_runs_the_setting_the_benchmark_measured():
    tuned = tomllib.loads((ROOT / "benchmarks/tune-cpu/tuned.toml").read_text())
    assert {k: tuned["specreason"][k] for k in MEASURED} == MEASURED
    ran = json.loads((ROOT / "benchmarks/test-cpu-r3/meta.json").read_text())["settings"]
    assert ran["config_file"] == "benchmarks/tune-cpu/tuned.toml"
    for field in ("budget", "step_max_tokens", "answer_max_tokens", "temperature", "lookahead"):
        assert ran[field] == MEASURED[field], field


def test_the_verdict_quotes_the_committed_figures():
    tuned = tomllib.loads((ROOT / "benchmarks/tune-cpu/tuned.toml").read_text())
    assert tuned["evidence"]["recommendation"] == "sd"
    paired = json.loads((ROOT / "benchmarks/test-cpu-r3/paired.json").read_text())
    sd = next(row for row in paired if row["run"] == "sd")
    low, high = sd["vs_base"]["speedup_95"]
    text = VERDICTS["cpu"]
    assert f"{sd['vs_base']['speedup']:.2f}x" in text and f"{low:.2f}-{high:.2f}" in text
    assert f"{sd['correct']}/{sd['problems']} right" in text
    assert "use `sd`" in text and "GSM8K test 101-140" in text and "BENCHMARKS.md" in text


def test_the_summary_grades_each_answer_and_closes_with_the_verdict():
    rows = [
        Answered("SpecReason", "48 + 24 = 72.\n\nThe answer is 72.", 40.0),
        Answered("base model alone", "The answer is 72.", 100.0),
        Answered("sd", "The answer is 70.", 50.0),
    ]
    lines = summary_lines(rows, "72", profile_name="cpu", measured=True, sd_note="started")
    text = "\n".join(lines)
    spec, base, sd = (
        next(li for li in lines if li.startswith(n)) for n in ("SpecR", "base", "sd ")
    )
    assert spec.split()[1:] == ["72", "yes", "40.0", "2.50x"]
    assert base.split()[3:] == ["72", "yes", "100.0", "1.00x"]
    assert sd.split()[1:] == ["70", "no", "50.0", "2.00x"]
    assert "gold answer: 72" in text and "sd: started" in text
    assert lines[-2] == VERDICTS["cpu"] and lines[-1] == NOT_A_BENCHMARK
    assert "not a benchmark" in lines[-1] and "one question, one run" in lines[-1]
    assert "changed by flags" not in text
    other = summary_lines(rows[:2], None, profile_name="cpu-test", measured=False, sd_note="no")
    joined = "\n".join(other)
    assert "not graded" in joined and "changed by flags" in joined
    assert "no tune verdict is measured for the cpu-test pair" in joined
    assert " yes " not in joined  # nothing graded without a gold answer


class FakeEndpoint:
    def __init__(self, url: str, name: str = "server", **_: Any) -> None:
        self.url, self.name = url, name

    async def model_name(self) -> str:
        return self.name


class FakeGraph:
    def __init__(self, config: Any) -> None:
        self.config = config

    async def astream(self, _input: Any, stream_mode: Any):
        yield "custom", {"type": "done", "reason": "end"}
        yield "values", {"answer": "The answer is 72.", "steps": []}


@pytest.fixture
def fakes(monkeypatch):
    """Launchers, endpoints, graph and single-model runs that record what the demo did."""
    log: list[Any] = []

    class FakeLauncher:
        def __init__(self, profile, *, roles=("draft", "base"), **_: Any) -> None:
            self.profile, self.roles = profile, roles

        def __enter__(self):
            log.append(("start", self.profile.name, self.profile.variant, self.roles))
            return self

        def __exit__(self, *exc: object) -> None:
            log.append(("stop", self.profile.variant))

        @property
        def urls(self) -> dict[str, str]:
            port = "8202" if self.profile.variant is None else "8302"
            return {"draft": "http://d/v1", "base": f"http://b:{port}/v1"}

    async def fake_single_model(endpoint, messages, config):
        log.append(("alone", endpoint.url, config.lookahead, messages[0][1]))
        text = "The answer is 72." if endpoint.name == "sd" else "The answer is 71."
        return SingleModelRun(text, 10, 5.0 if endpoint.name == "sd" else 9.0, "stop")

    def fake_graph(draft, base, *, config, family):
        log.append(("graph", config.judge, config.likelihood_threshold, config.lookahead))
        return FakeGraph(config)

    monkeypatch.setattr(demo, "Launcher", FakeLauncher)
    monkeypatch.setattr(demo, "single_model", fake_single_model)
    monkeypatch.setattr(demo, "create_specreason_graph", fake_graph)
    monkeypatch.setattr(demo, "OpenAIEndpoint", FakeEndpoint)
    monkeypatch.setattr(
        demo, "endpoint_pair", lambda d, b: (FakeEndpoint(d, "draft"), FakeEndpoint(b, "base"))
    )
    return log


def test_the_demo_stops_the_pair_then_starts_the_sd_base_alone(fakes, capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    starts = [e for e in fakes if e[0] in ("start", "stop")]
    assert starts == [
        ("start", "cpu", None, ("draft", "base")),
        ("stop", None),
        ("start", "cpu", "sd", ("base",)),  # the sd base server, after the pair stopped
        ("stop", "sd"),
    ]
    assert ("graph", "arithmetic+likelihood", -0.55, False) in fakes  # the measured setting
    alone = [e for e in fakes if e[0] == "alone"]
    assert [e[1] for e in alone] == ["http://b:8202/v1", "http://b:8302/v1"]
    assert all(e[2] is False for e in alone)
    assert all("The answer is N." in e[3] for e in alone)  # the benchmark's prompt
    assert "lookahead off" in out and "the sd comparison added" in out
    rows = {line[:18].strip(): line[18:].split() for line in out.splitlines()}
    assert rows["SpecReason"][:2] == ["72", "yes"]
    assert rows["base model alone"][:2] == ["71", "no"]
    assert rows["sd"][:2] == ["72", "yes"]
    assert VERDICTS["cpu"] in out and NOT_A_BENCHMARK in out


def test_with_running_servers_sd_needs_its_url(fakes, capsys):
    urls = ["--draft-url", "http://d/v1", "--base-url", "http://b/v1"]
    assert main(["demo", *urls, "--question", "What is 12*7?"]) == 0
    out = capsys.readouterr().out
    assert not [e for e in fakes if e[0] == "start"]
    assert "sd: not run: give --sd-base-url" in out and "not graded" in out
    assert main(["demo", *urls, "--sd-base-url", "http://s/v1", "--gold", "72"]) == 0
    out = capsys.readouterr().out
    assert "sd: the server given" in out and "gold answer: 72" in out
    assert main(["demo", *urls, "--no-sd", "--judge", "likelihood", "--threshold=-1"]) == 0
    out = capsys.readouterr().out
    assert "sd: not run (--no-sd)" in out and "changed by flags" in out
    assert main(["demo", "--sd-base-url", "http://s/v1"]) == 2
