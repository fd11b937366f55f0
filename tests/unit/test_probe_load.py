"""`specreason probe` under load (issue 54): natural continuations of different real problems,
the ceilings and verdict read at `--load N`, sd's predicted speed-up by load, and
`bench load --probe` showing it beside the measured cells (scripted servers, a fake clock)."""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace
from typing import Any

import pytest

from langchain_specreason.endpoint import ChatRequest, Completion
from langchain_specreason.errors import ConfigError, EndpointError
from langchain_specreason.lab.load.modes_report import (
    render_modes_markdown,
    summarise_cells,
    write_modes_report,
)
from langchain_specreason.lab.probe import command, report, speeds
from langchain_specreason.lab.probe.ceilings import (
    ceilings,
    loaded,
    sd_by_load,
    verdict,
)
from langchain_specreason.lab.probe.command import concurrencies, tune_command
from langchain_specreason.lab.probe.judging import Judged, JudgeSample
from langchain_specreason.lab.probe.prompts import BUILTIN, probe_prompts, shared_streams
from langchain_specreason.lab.probe.speeds import Decode, Stream, batch_step, decode, timed_stream
from langchain_specreason.lab.shared import datasets
from langchain_specreason.lab.shared.datasets import Problem
from langchain_specreason.lab.shared.prompts import INSTRUCTIONS, build_prompt

from .fakes import ScriptedEndpoint
from .test_probe import HAND, _probe_args


class FakeClock:
    """``time`` for :mod:`.speeds`: ``now`` moves only when a fake server says so."""

    def __init__(self, tick: float = 0.0) -> None:
        self.now = 0.0
        self.tick = tick

    def perf_counter(self) -> float:
        self.now += self.tick
        return self.now


class TimedServer:
    """Streams a given number of tokens per prompt, each costing given fake seconds."""

    name = "base"
    base_url = "http://base.invalid/v1"

    def __init__(self, clock: FakeClock, lengths: dict[str, tuple[int, float]]) -> None:
        self.clock = clock
        self.lengths = lengths
        self.requests: list[ChatRequest] = []

    async def stream(self, request: ChatRequest):
        self.requests.append(request)
        tokens, step = self.lengths[request.messages[0]["content"]]
        self.clock.now += 0.5  # prefill: before the first text, out of the decode time
        yield Completion(text="t ")
        for _ in range(tokens - 1):
            self.clock.now += step
            yield Completion(text="t ")
        yield Completion(text="", finish_reason="stop", completion_tokens=tokens)


# -- the decode measurement ------------------------------------------------------------------


async def test_decode_streams_end_naturally_on_different_prompts_and_count_the_servers_tokens(
    monkeypatch,
):
    clock = FakeClock()
    monkeypatch.setattr(speeds, "time", clock)
    # a long answer (11 tokens, 1 s a step) and a short one (3 tokens, 0.5 s a step)
    server = TimedServer(clock, {"long": (11, 1.0), "short": (3, 0.5)})
    prompts = [[{"role": "user", "content": q}] for q in ("long", "short")]
    got = await decode(server, prompts, 2, 256)
    assert [r.messages[0]["content"] for r in server.requests] == ["long", "short"]
    for r in server.requests:  # greedy, capped, no ignore_eos: each ends where its answer ends
        assert r.max_tokens == 256 and r.temperature == 0.0 and not r.extra_body
    assert got.stream_tokens == (11, 3) and got.tokens == 14
    # weighted by tokens: (10 + 1) s over (10 + 2) steps, not the mean of 1.0 and 0.5
    assert got.step_s == pytest.approx(11 / 12)
    assert got.as_dict()["stream_tokens"] == [11, 3]


def test_the_batch_step_weighs_each_stream_by_its_tokens():
    long, short = Stream(0.1, 9.0, 10), Stream(0.1, 4.0, 3)  # steps 1.0 and 2.0
    assert batch_step([long, short]) == pytest.approx(13 / 11)
    same = [Stream(0.1, 3.0, 4), Stream(0.2, 6.0, 4)]  # equal lengths: the mean of the steps
    assert batch_step(same) == pytest.approx((1.0 + 2.0) / 2)


async def test_a_stream_without_the_servers_token_count_is_an_error():
    server = ScriptedEndpoint("base", lambda r: Completion(text="a b", finish_reason="stop"))
    with pytest.raises(EndpointError, match="no completion tokens"):
        await timed_stream(server, ChatRequest([{"role": "user", "content": "q"}], 8))


# -- the prompts -----------------------------------------------------------------------------


def _fake_set(monkeypatch, grader: str = "number", count: int = 10) -> None:
    problems = [Problem(f"p{i}", f"Question {i}?", "1", grader) for i in range(count)]
    monkeypatch.setitem(datasets.BUILTIN, "gsm8k-train", lambda seed=0: problems)


def test_the_default_prompts_are_gsm8k_train_problems_in_the_benchmarks_prompt(monkeypatch):
    _fake_set(monkeypatch)
    assert _probe_args().prompts == "gsm8k-train" and _probe_args().offset == 0
    got = probe_prompts("gsm8k-train", offset=2, limit=3)
    assert got.questions == ["Question 2?", "Question 3?", "Question 4?"]
    assert [t[0]["content"] for t in got.turns] == [
        build_prompt(Problem(f"p{i}", f"Question {i}?", "1", "number")) for i in (2, 3, 4)
    ]
    assert len(got) == 3 and got.turns[0][0]["role"] == "user"
    _fake_set(monkeypatch, grader="math")
    assert (
        probe_prompts("gsm8k-train", limit=1).turns[0][0]["content"].endswith(INSTRUCTIONS["math"])
    )


def test_builtin_and_file_prompts_and_their_offset(tmp_path):
    got = probe_prompts("builtin")
    assert got.questions == list(BUILTIN)
    assert got.turns[0][0]["content"] == f"{BUILTIN[0]}\n\n{INSTRUCTIONS['number']}"
    mine = tmp_path / "mine.txt"
    mine.write_text("a?\nb?\nc?\n")
    assert probe_prompts(str(mine), offset=1, limit=1).questions == ["b?"]
    with pytest.raises(ConfigError, match="--offset 3"):
        probe_prompts(str(mine), offset=3)
    with pytest.raises(ConfigError, match="--offset"):
        probe_prompts("builtin", offset=-1)
    # 4 built-in questions at 8 streams: 4 streams repeat another's prompt
    assert shared_streams(4, 8) == 4 and shared_streams(8, 8) == 0


# -- the ceilings at a load ------------------------------------------------------------------


def test_the_ceilings_at_load_4_read_every_step_at_4_streams():
    # HAND at 4 streams: draft 0.15, base 0.9, sd 1.5: c = 1/6, v = 2.7 / (30 * 0.9) = 0.1,
    # sd = 0.6 (slower than the base there: the reference is the base)
    at4 = ceilings(replace(HAND, load=4))
    assert at4.load == 4
    assert at4.c == pytest.approx(1 / 6) and at4.v == pytest.approx(0.1)
    assert at4.judge_full == pytest.approx(1 / (1 / 6 + 0.1))  # 3.75
    assert at4.sd == pytest.approx(0.6)
    assert at4.c_sd == pytest.approx(0.1) and at4.v_sd == pytest.approx(5.0 / (30 * 1.5))
    # agreement at k = 1: the 4 requests' 2 positions put 8 on the base (1.8 s a step, twice
    # t_b(4)): position 0 alone to 1/6, both at half speed until 11/6, position 1 alone to 2
    assert at4.agree[1].speedup == pytest.approx(2 / 2.0)
    said = verdict(at4)
    assert (said.reference, said.reference_speedup, said.load) == ("base", 1.0, 4)
    text = report.verdict_text(said, "specreason tune")
    assert text.startswith("At 4 requests at once: can beat the base model by more than")
    # the default load keeps the one-stream numbers, and the text says so
    at1 = ceilings(HAND)
    assert at1.load == 1 and at1.sd == pytest.approx(1.8)
    assert report.verdict_text(verdict(at1), "x").startswith("One request at a time: ")


def test_a_load_a_server_was_not_measured_at_is_refused():
    with pytest.raises(ConfigError, match="load 3: the draft server's decode was not measured"):
        ceilings(replace(HAND, load=3))
    # sd not measured at the load: no sd ceilings there, the base is the reference
    at8 = ceilings(replace(HAND, load=8))
    assert at8.sd is None and verdict(at8).reference == "base"


def test_a_round_at_load_n_costs_the_base_at_n_times_its_positions():
    steps = {1: 0.4, 2: 0.5, 4: 0.8, 8: 1.6}
    assert loaded(steps, 1, 3) == {1: 0.4, 2: 0.5, 3: 0.5}  # load 1: the steps as measured
    assert loaded(steps, 4, 3) == {1: 0.8, 2: 1.6, 3: 1.6}  # 12 running reads 8's step
    assert loaded(steps, 2, 2) == {1: 0.5, 2: 0.8}


def test_sd_by_load_is_the_base_step_over_the_sd_step_at_each_measured_load():
    assert sd_by_load(HAND.base_step_s, HAND.sd_step_s) == {
        1: pytest.approx(1.8), 2: pytest.approx(0.9), 4: pytest.approx(0.6)
    }  # fmt: skip
    assert sd_by_load(HAND.base_step_s, {}) == {}
    assert ceilings(HAND).sd_by_load == sd_by_load(HAND.base_step_s, HAND.sd_step_s)


def test_concurrencies_always_measure_the_load_and_name_the_flags():
    assert concurrencies("1,2", 4) == [1, 2, 4]
    assert concurrencies("2,8", 8) == [1, 2, 8]
    with pytest.raises(ConfigError, match="--load must be at least 1"):
        concurrencies("1,2", 0)
    with pytest.raises(ConfigError, match="the load the verdict is read at is --load N"):
        concurrencies("4 at once")
    args = _probe_args("--load", "4", "--ignore-eos")
    assert (args.load, args.ignore_eos) == (4, True)
    assert _probe_args().load == 1 and _probe_args().ignore_eos is False


def test_the_tune_command_at_a_load_runs_tune_at_that_load(tmp_path):
    summary = tmp_path / "summary.json"
    at4 = tune_command(_probe_args("--profile", "cpu", "--load", "4"), summary, True)
    assert at4 == (
        f"specreason tune --profile cpu --concurrency 4 --probe {summary} --out runs/tune"
    )
    at1 = tune_command(_probe_args("--profile", "cpu"), summary, True)
    assert "--concurrency" not in at1


# -- summary.json: the load recorded, old files read at 1 ------------------------------------


def _doc(load: int) -> dict[str, Any]:
    decodes = {
        role: [
            speeds.fastest([Decode(n, s, 0.1, 1.0, 16 * n), Decode(n, s * (1 + n / 100), 0.1,
                                                                   1.0, 16 * n)])
            for n, s in sorted(steps.items())
        ]
        for role, steps in (("draft", HAND.draft_step_s), ("base", HAND.base_step_s),
                            ("sd", HAND.sd_step_s or {}))
    }  # fmt: skip
    # HAND's judge: steps of 30 tokens, 2.7 s a call on the base (5 s on sd), 80% accepted
    judges = {
        role: JudgeSample.of(
            "arithmetic+likelihood", [Judged(30, i < 4, seconds, 200, 128) for i in range(5)]
        )
        for role, seconds in (("base", 2.7), ("sd", 5.0))
    }
    measured = replace(
        HAND,
        spread={
            role: next(d.spread for d in ds if d.concurrency == load)
            for role, ds in decodes.items()
        },
        load=load,
    )
    found = ceilings(measured)
    cold = speeds.Prefill(500, 0, 2.0)
    return report.summary(
        {"judge": "arithmetic+likelihood", "load": load, "ignore_eos": False},
        decodes,
        {role: (cold, cold) for role in decodes},
        judges,
        found,
        verdict(found),
        "specreason tune --probe s.json",
    )


def test_summary_records_the_load_and_rebuilds_at_it(tmp_path):
    doc = _doc(4)
    path = report.write(doc, tmp_path)
    back = json.loads(path.read_text())
    assert back["probe"]["load"] == 4
    assert back["ceilings"]["load"] == 4 and back["verdict"]["load"] == 4
    assert back["tune"]["load"] == 4
    assert back["ceilings"]["sd_by_load"] == {
        "1": pytest.approx(1.8), "2": pytest.approx(0.9), "4": pytest.approx(0.6)
    }  # fmt: skip
    # the band is the spreads at the load: 4% on each of the 3 servers, the floor above it
    assert back["ceilings"]["spread"] == pytest.approx(0.12)
    assert report.measured_of(back).load == 4
    assert report.load(path) == back
    table = report.table(back)
    assert "decode (greedy, natural length;" in table
    assert "ceilings at 4 requests at once (speed-up against the base at the same load" in table
    assert "sd over the base by load (t_b(N) / t_s(N)): 1: 1.80x, 2: 0.90x, 4: 0.60x" in table
    assert "verdict: At 4 requests at once: " in table


def test_a_summary_without_a_load_reads_at_one_stream_with_its_fixed_length(tmp_path):
    old = json.loads(json.dumps(_doc(1)))
    del old["probe"]["load"], old["probe"]["ignore_eos"]
    assert report.measured_of(old).load == 1
    assert report.load_sd_prediction(report.write(old, tmp_path)) == sd_by_load(
        HAND.base_step_s, HAND.sd_step_s
    )
    assert "decode (greedy, fixed length;" in report.table(old)
    assert report.rebuild(old)["ceilings"]["named"] == _doc(1)["ceilings"]["named"]


def test_the_sd_prediction_needs_a_probe_summary_with_sd(tmp_path):
    no_sd = _doc(1)
    del no_sd["decode"]["sd"]
    path = tmp_path / "no-sd.json"
    path.write_text(json.dumps(no_sd))
    with pytest.raises(ConfigError, match="measured no sd server"):
        report.load_sd_prediction(path)
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ConfigError, match="not a probe summary"):
        report.load_sd_prediction(bad)
    with pytest.raises(ConfigError, match="missing"):
        report.load_sd_prediction(tmp_path / "missing.json")


# -- the whole command on scripted servers ---------------------------------------------------


class FakeSource:
    """:class:`ServerSource` for running servers that are scripted endpoints."""

    explicit = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.urls = args[1:4]

    @contextlib.contextmanager
    def servers(self, variant: str | None):
        draft, base, sd = self.urls
        yield FakePair(draft, sd if variant else base)


class FakePair:
    api_key = None

    def __init__(self, draft_url: str, base_url: str) -> None:
        self.draft_url, self.base_url = draft_url, base_url

    async def describe(self) -> dict[str, Any]:
        return {"draft": self.draft_url, "base": self.base_url}


def _server(name: str, per_prompt: int) -> ScriptedEndpoint:
    def handler(request: ChatRequest) -> Completion:
        content = request.messages[0]["content"]
        n = per_prompt + sum(map(ord, content)) % 5  # answers of different lengths
        return Completion(
            text=" ".join(["w"] * n), finish_reason="stop", completion_tokens=n,
            prompt_tokens=100, cached_tokens=0, seconds=0.1,
        )  # fmt: skip

    return ScriptedEndpoint(name, handler)


async def test_probe_at_load_4_measures_4_different_problems_and_reads_its_verdict_there(
    monkeypatch, tmp_path, capsys
):
    _fake_set(monkeypatch, count=12)
    monkeypatch.setattr(speeds, "time", FakeClock(tick=0.01))
    servers = {
        "http://d/v1": _server("draft", 4),
        "http://b/v1": _server("base", 9),
        "http://s/v1": _server("sd", 9),
    }
    monkeypatch.setattr(command, "ServerSource", FakeSource)
    monkeypatch.setattr(command, "endpoint_pair", lambda d, b, **_: (servers[d], servers[b]))

    async def no_steps(*args: Any, **kwargs: Any) -> list[Any]:
        return []

    async def no_judge(name: str, *args: Any) -> JudgeSample:
        return JudgeSample.of(name, [])

    monkeypatch.setattr(command, "draft_steps", no_steps)
    monkeypatch.setattr(command, "_judged", no_judge)
    args = _probe_args(
        *("--draft-url", "http://d/v1", "--base-url", "http://b/v1"),
        *("--sd-base-url", "http://s/v1", "--family", "instruct"),
        *("--concurrency", "1,2", "--load", "4", "--repeats", "1", "--offset", "3"),
        *("--out", str(tmp_path), "--no-progress"),
    )
    assert await command.run_probe(args) == 0
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert doc["probe"]["load"] == 4 and doc["probe"]["ignore_eos"] is False
    assert doc["probe"]["concurrency"] == [1, 2, 4] and doc["probe"]["max_tokens"] == 384
    assert doc["probe"]["prompts"] == "gsm8k-train" and doc["probe"]["offset"] == 3
    # at 4 streams, 4 different problems (from --offset 3), none forced past its end
    decodes = [r for r in servers["http://b/v1"].requests if r.max_tokens == 384]
    at4 = [r.messages[0]["content"] for r in decodes[-4:]]
    assert at4 == [build_prompt(Problem(f"p{i}", f"Question {i}?", "1", "number"))
                   for i in (3, 4, 5, 6)]  # fmt: skip
    assert all(not r.extra_body for r in decodes)
    rows = {r["concurrency"]: r for r in doc["decode"]["base"]}
    assert len(set(rows[4]["stream_tokens"])) > 1  # natural lengths differ
    steps = {
        role: {r["concurrency"]: r["step_s"] for r in rs} for role, rs in doc["decode"].items()
    }
    assert doc["ceilings"]["load"] == 4 and doc["verdict"]["load"] == 4
    assert doc["ceilings"]["c"] == pytest.approx(steps["draft"][4] / steps["base"][4])
    assert doc["ceilings"]["named"]["sd"] == pytest.approx(steps["base"][4] / steps["sd"][4])
    assert doc["verdict"]["text"].startswith("At 4 requests at once: ")
    assert "--concurrency 4 --probe" in doc["verdict"]["tune_command"]
    assert "At 4 requests at once" in capsys.readouterr().out


# -- bench load --probe: the prediction beside the measured sd cell ---------------------------


def _cell_records() -> list[dict[str, Any]]:
    out = []
    for mode, latency in (("base", 30.0), ("sd", 20.0)):
        for q in range(4):
            out.append(
                {"mode": mode, "concurrency": 4, "problem_id": f"q{q}", "ok": True,
                 "correct": True, "latency_s": latency + q, "started_s": 0.0,
                 "ended_s": latency + q, "completion_tokens": 100}
            )  # fmt: skip
    return out


def test_the_load_report_shows_the_probes_prediction_beside_the_sd_cell():
    summary = summarise_cells(_cell_records(), probe={1: 1.9, 4: 1.2})
    sd = next(r for r in summary["rows"] if r["mode"] == "sd")
    assert sd["probe_sd_speedup"] == pytest.approx(1.2)
    assert summary["probe_sd"] == {"1": 1.9, "4": 1.2}
    assert "probe_sd_speedup" not in next(r for r in summary["rows"] if r["mode"] == "base")
    text = render_modes_markdown(summary)
    measured = sd["vs_base"]["speedup"]  # (30+31+32+33) / (20+21+22+23)
    assert measured == pytest.approx(126 / 86)
    assert "| load | measured speed-up vs base [95%] | wall vs base | probe predicts |" in text
    assert f"| 1.20× | {measured / 1.2:.2f} |" in text
    # without a probe the report is as it was
    assert "probe predicts" not in render_modes_markdown(summarise_cells(_cell_records()))


def test_write_modes_report_reads_the_probe_file(tmp_path):
    from langchain_specreason.lab.shared.results import JsonlAppender

    with JsonlAppender(tmp_path / "results.jsonl") as sink:
        for record in _cell_records():
            sink.write(record)
    probe = report.write(_doc(1), tmp_path / "probe")
    write_modes_report(tmp_path, probe)
    assert "| 4 | 1.47× [" in (tmp_path / "summary.md").read_text()
    assert json.loads((tmp_path / "summary.json").read_text())["probe_sd"]["4"] == (
        pytest.approx(0.6)
    )


def test_bench_load_takes_a_probe_summary_with_modes_only(tmp_path):
    from langchain_specreason.cli import build_parser
    from langchain_specreason.lab.load.flags import make_plan

    probe = report.write(_doc(1), tmp_path / "probe")
    urls = ["--draft-url", "http://d.invalid/v1", "--base-url", "http://b.invalid/v1",
            "--sd-base-url", "http://s.invalid/v1"]  # fmt: skip

    def plan(*argv: str):
        return make_plan(build_parser().parse_args(["bench", "load", *urls, *argv]))

    got = plan("--modes", "base,sd", "--concurrency", "1,4", "--probe", str(probe))
    assert got.probe == probe
    assert "probe" not in got.meta_settings  # a resume may give another probe, or none
    assert plan("--modes", "base,sd", "--concurrency", "1,4").probe is None
    with pytest.raises(ConfigError, match="--probe goes with --modes"):
        make_plan(build_parser().parse_args(
            ["bench", "load", *urls[:4], "--replicas", "1", "--probe", str(probe)]
        ))  # fmt: skip
    other = tmp_path / "other.json"
    other.write_text('{"schema": 1}')
    with pytest.raises(ConfigError, match="not a probe summary"):
        plan("--modes", "base,sd", "--concurrency", "1,4", "--probe", str(other))
