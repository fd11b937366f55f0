"""``bench load --modes --cores``: which servers each block starts and on which cores, the
cores on every line, the report naming them, and one ``--cores`` setting per folder.

No server starts: the launcher is the real one's core binding with its start and stop left out;
``/metrics`` pages, cache resets and ``/v1/models`` are scripted.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from langchain_specreason import ConfigError
from langchain_specreason.lab.load import cells as load_cells
from langchain_specreason.lab.load.modes import Block, Cell, plan_blocks
from langchain_specreason.lab.load.modes_report import render_modes_markdown, summarise_cells
from langchain_specreason.lab.shared import servers as servers_module
from langchain_specreason.lab.shared.results import read_records
from langchain_specreason.lab.shared.servers import ServerPair, ServerSource
from langchain_specreason.serving import cores as cores_module
from langchain_specreason.serving import profiles as profiles_module
from langchain_specreason.serving.launcher import Launcher
from langchain_specreason.serving.profiles import load_profile
from tests.unit.test_bench_load_modes import (
    PROBLEMS,
    URLS,
    FakeSolver,
    fake_world,
    page,
    plan_of,
    rec,
)

CPU = load_profile("cpu")
DRAFT, BASE = CPU.draft.url, CPU.base.url
ALL_MODES = ["base", "sd", "sd-dyn", "specreason", "agree"]
PAIR, ALONE = ("draft", "base"), ("base",)


@pytest.fixture
def machine(monkeypatch):
    """A 2-core machine on which no server of the profiles listens yet."""
    monkeypatch.setattr(cores_module, "machine_cores", lambda: frozenset({0, 1}))
    monkeypatch.setattr(profiles_module, "machine_cores", lambda: frozenset({0, 1}))
    monkeypatch.setattr(profiles_module, "listening", lambda host, port: False)


@pytest.fixture
def launched(monkeypatch, machine) -> list[tuple[str | None, tuple[str, ...], bool, Launcher]]:
    """Each launcher the bench makes: (variant, roles, keep_profile_cores, the launcher).

    The real launcher binds the cores; entering it starts nothing.
    """
    made: list[tuple[str | None, tuple[str, ...], bool, Launcher]] = []

    class NotStarted(Launcher):
        def __init__(self, profile, *, roles, keep_profile_cores=False, **kwargs):
            super().__init__(profile, roles=roles, keep_profile_cores=keep_profile_cores, **kwargs)
            made.append((profile.variant, tuple(roles), keep_profile_cores, self))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        @property
        def urls(self):
            return {role: getattr(self.profile, role).url for role in self.roles}

    monkeypatch.setattr(servers_module, "Launcher", NotStarted)
    return made


# -- the plan -----------------------------------------------------------------------------


def roles_of(blocks: list[Block]) -> list[tuple[str | None, tuple[str, ...], list[str], bool]]:
    return [
        (b.variant, b.roles, list(dict.fromkeys(c.mode for c in b.cells)), b.keep_profile_cores)
        for b in blocks
    ]


def test_cores_profile_starts_the_draft_only_where_a_mode_needs_it():
    """The pair's split everywhere: the sd blocks start the base alone, on its own core."""
    assert roles_of(plan_blocks(ALL_MODES, [1, 2])) == [
        (None, PAIR, ["base", "specreason", "agree"], True),
        ("sd", ALONE, ["sd"], True),
        ("sd-dyn", ALONE, ["sd-dyn"], True),
    ]
    assert roles_of(plan_blocks(["sd", "base"], [1], "profile")) == [
        (None, ALONE, ["base"], True),
        ("sd", ALONE, ["sd"], True),
    ]


def test_cores_mode_runs_the_modes_without_a_draft_in_blocks_of_their_own():
    """Each mode as deployed: the plain base apart from the pair of specreason and agree."""
    blocks = plan_blocks(ALL_MODES, [1, 2], "mode")
    assert roles_of(blocks) == [
        (None, ALONE, ["base"], False),
        (None, PAIR, ["specreason", "agree"], False),
        ("sd", ALONE, ["sd"], False),
        ("sd-dyn", ALONE, ["sd-dyn"], False),
    ]
    assert blocks[1].cells == (
        Cell("specreason", 1),
        Cell("agree", 1),
        Cell("specreason", 2),
        Cell("agree", 2),
    )
    assert [b.label for b in blocks] == [
        "plain (base alone)",
        "plain",
        "sd (base alone)",
        "sd-dyn (base alone)",
    ]
    # the named order decides between two plain blocks
    assert [b.roles for b in plan_blocks(["agree", "base"], [1], "mode")] == [PAIR, ALONE]


# -- the servers of a block ---------------------------------------------------------------


async def test_a_block_of_the_base_alone_starts_the_base_on_the_cores_asked(launched, monkeypatch):
    async def no_models(url, *, api_key=None):
        return []

    monkeypatch.setattr(servers_module, "served_models", no_models)
    source = ServerSource("cpu")
    with source.servers("sd", roles=("base",)) as pair:
        assert pair.draft is None and pair.roles == ALONE and pair.urls == {"base": BASE}
        with pytest.raises(AttributeError, match="only the base"):
            _ = pair.draft_url
        assert pair.cores == {"base": "0-1"}  # the draft's core too: the whole machine
        assert pair.profile is launched[-1][3].profile  # the launcher's binding, not the toml's
        described = await pair.describe()
    assert described["draft"] is None and described["base"]["cores"] == "0-1"
    assert described["base"]["env"]["VLLM_CPU_OMP_THREADS_BIND"] == "0-1"
    with source.servers("sd", roles=("base",), keep_profile_cores=True) as pair:
        assert pair.cores == {"base": "1"}
    with source.servers(None) as pair:  # the default, as every other caller: both, split
        assert (pair.draft_url, pair.base_url) == (DRAFT, BASE)
        assert pair.cores == {"draft": "0", "base": "1"}
        assert (await pair.describe())["draft"]["cores"] == "0"
    assert [entry[:3] for entry in launched] == [
        ("sd", ALONE, False),
        ("sd", ALONE, True),
        (None, PAIR, False),
    ]


def test_given_urls_leave_the_draft_out_of_a_block_of_the_base_alone():
    source = ServerSource("cpu", "http://d.invalid/v1", "http://b.invalid/v1")
    with source.servers(None, roles=("base",)) as pair:
        assert pair.urls == {"base": "http://b.invalid/v1"}
        assert pair.cores == {"base": None}  # a running server's cores are not known
    with source.servers(None) as pair:
        assert pair.urls == {"draft": "http://d.invalid/v1", "base": "http://b.invalid/v1"}
    with pytest.raises(ConfigError, match="the draft and the base, or the base"):
        with source.servers(None, roles=("draft",)):
            pass


async def test_a_block_of_the_base_alone_reads_and_empties_only_the_base(tmp_path, monkeypatch):
    emptied: list[str] = []

    async def reset(url, *, api_key=None):
        emptied.append(url)
        return True

    monkeypatch.setattr(load_cells, "reset_prefix_cache", reset)
    plan = plan_of(*URLS, "--modes", "base", "--concurrency", "1", "--out", str(tmp_path))
    alone = ServerPair(None, None, "http://b.invalid/v1")
    watch = load_cells.make_watch(alone, plan)
    assert list(watch._servers) == ["base"]  # type: ignore[attr-defined]
    assert await load_cells.reset_caches(alone) is True
    assert emptied == ["http://b.invalid/v1"]
    pair = ServerPair(None, "http://d.invalid/v1", "http://b.invalid/v1")
    assert list(load_cells.make_watch(pair, plan)._servers) == ["draft", "base"]  # type: ignore[attr-defined]
    solver = load_cells.make_solver(alone, plan.runs["base"], plan)
    assert isinstance(solver, load_cells.LoadSolver)  # its mode never calls the draft


# -- a whole run: blocks, watch, resets and the cores on every line -----------------------

EXPECTED = {
    "profile": (
        [(None, PAIR, True), ("sd", ALONE, True)],
        {"base": {"draft": "0", "base": "1"}, "sd": {"base": "1"}},
        [DRAFT, BASE, DRAFT, BASE, BASE],  # base and specreason share the pair's block
    ),
    "mode": (
        [(None, ALONE, False), (None, PAIR, False), ("sd", ALONE, False)],
        {"base": {"base": "0-1"}, "specreason": {"draft": "0", "base": "1"}, "sd": {"base": "0-1"}},
        [BASE, DRAFT, BASE, BASE],
    ),
}


@pytest.mark.parametrize("cores", ["profile", "mode"])
async def test_each_line_records_the_cores_its_servers_ran_on(
    cores, tmp_path, launched, monkeypatch
):
    starts, by_mode, resets = EXPECTED[cores]
    read: list[str] = []
    emptied: list[str] = []

    async def metrics(self, role):
        read.append(role)
        return page(prompt=100 * len(read))

    async def reset(url, *, api_key=None):
        emptied.append(url)
        return True

    async def no_models(url, *, api_key=None):
        return []

    monkeypatch.setattr(load_cells.Watch, "page", metrics)
    monkeypatch.setattr(load_cells, "reset_prefix_cache", reset)
    monkeypatch.setattr(servers_module, "served_models", no_models)
    world = load_cells.World(
        load_cells.open_block,
        lambda pair, run, plan: FakeSolver(run),
        load_cells.make_watch,
        load_cells.reset_caches,
    )
    plan = plan_of(
        *("--profile", "cpu", "--modes", "base,sd,specreason", "--concurrency", "1"),
        *("--requests", "4", "--judge", "score", "--cores", cores, "--out", str(tmp_path)),
    )
    await load_cells.execute_modes(plan, PROBLEMS, world=world, progress=False)
    assert [entry[:3] for entry in launched] == starts
    records = read_records(tmp_path / "results.jsonl")
    for mode in ("base", "specreason", "sd"):
        got = [r["cores"] for r in records if r["mode"] == mode]
        assert got == [by_mode.get(mode, by_mode["base"])] * 4, mode
    lines = {c["mode"]: c for c in read_records(tmp_path / "cells.jsonl")}
    for mode, line in lines.items():
        assert line["cores"] == by_mode.get(mode, by_mode["base"])
        draft_read = "draft" in line["cores"]  # a block of the base alone never reads a draft
        assert (line["server"]["draft"] is not None) == draft_read, mode
        assert (line["gauges"]["draft"] is not None) == draft_read, mode
    assert emptied == resets  # before each cell, the block's servers' caches only
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert {r["mode"]: r["cores"] for r in summary["rows"]} == {
        m: by_mode.get(m, by_mode["base"]) for m in ("base", "sd", "specreason")
    }
    text = (tmp_path / "summary.md").read_text()
    alone = by_mode["sd"]["base"]
    assert f"| 1 | sd | base {alone} | 4/4" in text  # differ between cells: a column
    assert "| 1 | specreason | draft 0, base 1 | 4/4" in text
    meta = json.loads((tmp_path / "meta.json").read_text())
    described = meta["sessions"][0]["servers"]
    assert [s["draft"] is None for s in described] == [r == ALONE for _, r, _ in starts]
    assert described[-1]["base"]["cores"] == alone  # the binding, as started
    assert meta["settings"].get("cores") == (None if cores == "profile" else "mode")


# -- the report ---------------------------------------------------------------------------


def test_the_report_names_the_cores_only_when_they_differ():
    records = [rec(m, 1, i, latency=2.0) for m in ("base", "sd") for i in range(2)]
    same = [{**r, "cores": {"draft": "0", "base": "1"}} for r in records]
    text = render_modes_markdown(summarise_cells(same))
    assert "| 1 | sd | 2/2 [" in text  # no column
    assert "Every cell's servers ran on the same cores: draft 0, base 1." in text
    assert "not known" not in text  # the `?` legend only where a `?` is shown
    mixed = [{**r, "cores": {"base": "0-1"}} if r["mode"] == "sd" else r for r in same]
    text = render_modes_markdown(summarise_cells(mixed))
    assert "| load | mode | cores | right [95%] |" in text
    assert "| 1 | base | draft 0, base 1 | 2/2 [" in text and "| 1 | sd | base 0-1 | 2/2 [" in text
    unknown = [{**r, "cores": {"draft": None, "base": None}} for r in records]
    shown = render_modes_markdown(summarise_cells(unknown))
    assert "same cores: draft ?, base ? (`?`: not known)." in shown
    assert "cores" not in render_modes_markdown(summarise_cells(records))  # older folders


# -- one --cores setting per folder -------------------------------------------------------


def cores_plan(tmp_path, cores: str):
    return plan_of(
        *("--profile", "cpu", "--modes", "base,specreason", "--concurrency", "1"),
        *("--requests", "4", "--judge", "score", "--cores", cores, "--out", str(tmp_path)),
    )


@pytest.mark.parametrize(("first", "then"), [("profile", "mode"), ("mode", "profile")])
async def test_resume_refuses_another_cores_setting(tmp_path, first, then):
    events: list[Any] = []
    run = load_cells.execute_modes
    await run(cores_plan(tmp_path, first), PROBLEMS, world=fake_world(events), progress=False)
    events.clear()
    with pytest.raises(ConfigError) as refused:
        await run(cores_plan(tmp_path, then), PROBLEMS, world=fake_world(events), progress=False)
    message = str(refused.value)
    assert f"--cores {then}: {tmp_path} holds cells measured with --cores {first}" in message
    assert "one folder holds one --cores setting" in message and "\n" not in message
    assert events == []  # refused before any server block
    await run(cores_plan(tmp_path, first), PROBLEMS, world=fake_world(events), progress=False)
    assert events == []  # the same setting resumes (every cell done)


async def test_a_folder_from_before_cores_resumes_on_the_profiles_cores(tmp_path):
    """meta.json without the setting: measured on the profile's cores, as --cores profile."""
    events: list[Any] = []
    await load_cells.execute_modes(
        cores_plan(tmp_path, "profile"), PROBLEMS, world=fake_world(events), progress=False
    )
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert "cores" not in meta["settings"]  # the default is not written: older folders match
    with pytest.raises(ConfigError, match="measured with --cores profile"):
        await load_cells.execute_modes(
            cores_plan(tmp_path, "mode"), PROBLEMS, world=fake_world(events), progress=False
        )


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        ([*URLS, "--modes", "base", "--cores", "mode"], "servers given by URL run on the cores"),
        (["--profile", "cpu", "--replicas", "1", "--cores", "mode"], "--cores mode goes with"),
    ],
)
def test_cores_mode_needs_the_profiles_servers_and_modes(tmp_path, argv, match):
    with pytest.raises(ConfigError, match=match):
        plan_of(*argv, "--out", str(tmp_path))


def test_an_unknown_cores_setting_is_refused_by_the_parser(tmp_path, capsys):
    with pytest.raises(SystemExit):
        plan_of(*URLS, "--modes", "base", "--cores", "all", "--out", str(tmp_path))
    assert "invalid choice: 'all'" in capsys.readouterr().err
