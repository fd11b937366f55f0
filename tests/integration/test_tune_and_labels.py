"""`specreason label`, `bench judges --labels` and `specreason tune` on the real cpu-test pair.

Tiny budgets keep each to a few minutes; quality numbers belong to the benchmark.
"""

from __future__ import annotations

import json

import pytest

from langchain_specreason import ChatSpecReason
from langchain_specreason.lab.labels.labelfile import load_labelled_steps
from tests.helpers import cli_ok, pair_flags, read_jsonl

pytestmark = pytest.mark.integration


def test_labelling_two_problems_end_to_end_writes_valid_labels(servers, tmp_path):
    out = tmp_path / "labels"
    urls = pair_flags(servers)
    small = [
        "--count",
        "2",
        "--m",
        "2",
        "--max-steps",
        "2",
        "--rollout-max-tokens",
        "24",
        "--budget",
        "48",
        "--no-progress",
    ]
    cli_ok("label", *urls, *small, "--out", str(out))
    rows = [json.loads(line) for line in (out / "labels.jsonl").read_text().splitlines()]
    assert 2 <= len(rows) <= 4 and len({r["problem_id"] for r in rows}) == 2
    for row in rows:
        assert row["problem_id"].startswith("gsm8k-train-")
        assert len(row["draft_correct"]) == len(row["base_correct"]) == 2
        assert row["advantage"] == pytest.approx(row["base_rate"] - row["draft_rate"])
        assert row["harmful"] == (row["advantage"] >= 0.5)
        assert row["step"].strip() and isinstance(row["steps"], list)
    assert len(load_labelled_steps(out / "labels.jsonl")) == len(rows)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["settings"]["m"] == 2 and meta["seed"] == 0 and meta["base_model"]
    # resumable: the same command does nothing new
    again = cli_ok("label", *urls, *small, "--out", str(out))
    assert "labelled 0 draft steps from 0 problems (2 already done)" in again.stdout

    # how noisy they are, from their own rollouts (offline)
    noise = cli_ok("bench", "labels", str(out))
    reliability = json.loads((out / "reliability.json").read_text())
    assert reliability["steps"] == len(rows) and reliability["m"] == 2
    assert reliability["harmful"] == sum(r["harmful"] for r in rows)
    assert "split half (1 + 1 rollouts a side)" in noise.stdout

    # the judge benchmark reads them
    judged = tmp_path / "judged"
    cli_ok(
        "bench",
        "judges",
        *urls,
        "--labels",
        str(out / "labels.jsonl"),
        "--judge",
        "likelihood,confidence,arithmetic,consistency",
        "--out",
        str(judged),
        "--no-progress",
    )
    results = read_jsonl(judged / "results.jsonl")
    sampled = [r for r in results if r["judge"] == "consistency"]
    assert len(sampled) == len(rows)  # the draft sampled each step's position, 4 at once
    for r in sampled:
        assert len(r["detail"]["samples"]) == 4
        assert 0 <= r["scores"]["numbers"] <= 1 and 0 <= r["scores"]["words"] <= 1
    summary = json.loads((judged / "summary.json").read_text())
    assert summary["fit_on_dev"] is False
    for name, row in summary["judges"].items():
        assert {"auroc", "auroc_95", "n", "harmful"} <= set(row), name
        if row["auroc_95"] is not None:
            low, high = row["auroc_95"]
            assert 0 <= low <= high <= 1, name
    # AUROC needs both kinds; with two problems there may be one kind only (then no rows)
    assert all(row["n"] == len(rows) for row in summary["judges"].values())


def test_tune_on_two_dev_problems_writes_a_config_the_chat_model_answers_with(servers, tmp_path):
    out = tmp_path / "tune"
    done = cli_ok(
        "tune",
        *pair_flags(servers),
        "--dev-count",
        "2",
        "--heldout-count",
        "2",
        "--judge",
        "arithmetic+likelihood",
        "--likelihood-threshold=-1000,0",  # with "=": a value starting with "-" is not a flag
        "--first-n-base-steps",
        "0",
        "--steps-ahead",
        "2",
        "--budget",
        "32",
        "--answer-max-tokens",
        "24",
        "--no-progress",
        "--out",
        str(out),
    )
    report = json.loads((out / "tune.json").read_text())
    assert report["choice"] in ("specreason", "sd", "base")
    assert done.stdout.startswith(report["choice"] + ":")
    names = [m["name"] for m in report["dev"]]
    dropped = [d["name"] for d in report["dropped"]]  # too many wrong answers to be chosen
    # two judge settings and the agree mode (rule result, steps_ahead 2); no sd
    assert names[0] == "base" and len(names) - 1 + len(dropped) == 3
    records = read_jsonl(out / "results.jsonl")
    assert {r["split"] for r in records} == {"dev", "heldout"}
    agree = [r for r in records if r["mode"] == "agree" and r["split"] == "dev"]
    assert len(agree) == 2 and all(r["config"]["verify"] == "agree" for r in agree)
    assert all(r["config"]["lookahead"] is False for r in records)
    assert (out / "tuned.toml").is_file() and (out / "pareto.png").is_file()
    llm = ChatSpecReason(
        draft_url=servers.draft_url, base_url=servers.base_url, config_file=str(out / "tuned.toml")
    )
    assert llm.spec_config().budget == 32
    assert llm.invoke("What is 12*7?").content.strip()
    # the benchmark runs the same setting from the file (for the report on test problems)
    problems = tmp_path / "p.jsonl"
    problems.write_text('{"question": "What is 12*7?", "answer": "84"}\n')
    cli_ok(
        "bench",
        *pair_flags(servers),
        "--dataset",
        str(problems),
        "--modes",
        "agree" if llm.spec_config().verify == "agree" else "specreason",
        "--config-file",
        str(out / "tuned.toml"),
        "--no-progress",
        "--out",
        str(tmp_path / "bench"),
    )
    [bench] = read_jsonl(tmp_path / "bench/results.jsonl")
    assert bench["config"] == llm.spec_config().as_dict()
