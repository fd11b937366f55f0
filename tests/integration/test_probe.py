"""`specreason probe` end to end on the cpu-test pair: a quick run writes its files.

The default path: GSM8K train problems from the data wheel (each stream a different one),
natural continuations, the verdict at the default load (one request at a time).

Nothing here is timed: the speeds are whatever the shared machine gives; the test checks that
every measurement, ceiling and the verdict are there and consistent with each other.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


def test_a_quick_probe_writes_its_summary_plot_and_verdict(servers, tmp_path):
    out = tmp_path / "probe"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "langchain_specreason.cli",
            "probe",
            "--draft-url",
            servers.draft_url,
            "--base-url",
            servers.base_url,
            "--quick",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads((out / "summary.json").read_text())
    assert (out / "probe.png").stat().st_size > 0
    assert list(doc) == ["schema", "probe", "decode", "prefill", "judge", "ceilings", "verdict",
                         "tune"]  # fmt: skip
    assert doc["probe"]["prompts"] == "gsm8k-train" and doc["probe"]["quick"] is True
    assert doc["probe"]["load"] == 1 and doc["probe"]["ignore_eos"] is False
    assert doc["probe"]["prompt_count"] >= 2  # each of the 2 streams a different problem
    assert set(doc["decode"]) == {"draft", "base"}  # no sd server given
    for rows in doc["decode"].values():
        assert [r["concurrency"] for r in rows] == [1, 2]
        for r in rows:  # natural continuations: at most --max-tokens 16 each, the server's count
            assert len(r["stream_tokens"]) == r["concurrency"] and r["step_s"] > 0
            assert all(1 < n <= 16 for n in r["stream_tokens"])
            assert r["tokens"] == sum(r["stream_tokens"])
    for pair in doc["prefill"].values():
        assert pair["cold"]["prompt_tokens"] > 100 and pair["cold"]["seconds"] > 0
    judge = doc["judge"]["base"]
    assert judge["judge"] == "arithmetic+likelihood" and 1 <= judge["steps"] <= 2
    c = doc["ceilings"]
    assert c["c"] == pytest.approx(
        doc["decode"]["draft"][0]["step_s"] / doc["decode"]["base"][0]["step_s"]
    )
    assert c["named"]["judge_full"] == pytest.approx(1 / (c["c"] + c["v"]))
    assert "agree_k1" in c["named"] and "sd" not in c["named"]
    assert doc["verdict"]["reference"] == "base" and doc["verdict"]["load"] == 1
    assert doc["verdict"]["text"].startswith("One request at a time: ")
    assert doc["ceilings"]["load"] == 1 and doc["ceilings"]["sd_by_load"] == {}
    # no sd server was probed: the printed tune command leaves out the sd settings
    assert doc["verdict"]["tune_command"].startswith(
        f"specreason tune --draft-url {servers.draft_url} --base-url {servers.base_url} "
        "--no-sd-settings --probe"
    )
    assert "verdict: " in done.stdout and "judge, every step accepted" in done.stdout
    assert "decode (greedy, natural length;" in done.stdout
    assert doc["tune"]["plain"]["any_judge"] == pytest.approx(1 / c["c"])
