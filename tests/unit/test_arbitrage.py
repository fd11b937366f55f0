"""Arbitrage pieces pinned with scripted endpoints: oracle, router judge, labels, modes."""

from __future__ import annotations

import json

import pytest

from langchain_specreason import SpecReasonConfig
from langchain_specreason.arbitrage.features import router_text
from langchain_specreason.arbitrage.oracle import OracleJudge
from langchain_specreason.arbitrage.router import RouterJudge
from langchain_specreason.endpoint import ChatRequest, Classified, Completion
from langchain_specreason.errors import ConfigError
from langchain_specreason.formats import get_format
from langchain_specreason.graph import create_specreason_graph
from langchain_specreason.judges import BaseModelScorer
from langchain_specreason.lab.shared.modes import Run, expand_runs, parse_taus
from langchain_specreason.lab.training.label import labelled_steps
from langchain_specreason.lab.training.settings import OracleSettings

from .fakes import ScriptedEndpoint, is_judge, partial_of, score, step

QUESTION = {"messages": [("user", "What is 12*7?")]}


def judged_step(req: ChatRequest) -> str:
    """The step under judgement in a judge prompt (the last paragraph of the reply)."""
    return req.messages[-3]["content"].rstrip("\n").split("\n\n")[-1]


def draft_handler(req: ChatRequest) -> Completion:
    index = partial_of(req).count("\n\n")
    return step(["D0.", "D1 wrong.", "D2 so 84."][index], end=index == 2)


def base_handler(req: ChatRequest) -> Completion:
    """Scores 'wrong' steps 1, others 8; writes B<i>. steps; ends at step 2."""
    if is_judge(req):
        digit = "1" if "wrong" in judged_step(req) else "8"
        return score(digit, [(digit, 0.0)])
    if req.stop is None:
        return Completion(text="84", finish_reason="stop", completion_tokens=1)
    index = partial_of(req).count("\n\n")
    return step(f"B{index}.", 7, end=index == 2)


class FakeRouter:
    """A classifier endpoint: p(escalate) = 0.9 when the draft step says 'wrong'."""

    name = "router"

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.truncates: list[int | None] = []

    async def classify(self, texts: list[str], *, truncate: int | None = None) -> Classified:
        self.texts += texts
        self.truncates.append(truncate)
        return Classified(
            probs=[
                [0.1, 0.9] if "wrong" in t.split("Next step (draft):")[-1] else [0.8, 0.2]
                for t in texts
            ],
            prompt_tokens=50,
            seconds=0.01,
        )


async def test_oracle_keeps_the_better_step_and_never_asks_the_base_twice():
    draft = ScriptedEndpoint("draft", draft_handler)
    base = ScriptedEndpoint("base", base_handler)
    scorer = BaseModelScorer(base, get_format("instruct"), score_method="average")
    graph = create_specreason_graph(
        draft, base, judge=OracleJudge(base, scorer), config=SpecReasonConfig()
    )
    out = await graph.ainvoke(QUESTION)
    # step 1: the base step (8) beats "D1 wrong." (1): escalated; others tie (8 vs 8): kept
    assert [s["decision"] for s in out["steps"]] == ["accepted", "rewritten", "accepted"]
    assert [s["text"] for s in out["steps"]] == ["D0.\n\n", "B1.\n\n", "D2 so 84."]
    assert out["steps"][1]["verdict"]["advantage"] == pytest.approx(7.0)
    assert out["steps"][1]["base_tokens"] == 7
    # one base step per position (3) plus two scores per position (6); no second rewrite
    assert len(base.generation_calls()) == 3
    assert len(base.judge_calls()) == 6

    rows = labelled_steps("p1", "What is 12*7?", out["steps"])
    assert [r["escalated"] for r in rows] == [False, True, False]
    assert rows[1]["draft_step"] == "D1 wrong.\n\n" and rows[1]["base_step"] == "B1.\n\n"
    assert rows[1]["prefix"] == [{"author": "draft", "text": "D0.\n\n"}]
    assert rows[2]["prefix"][1] == {"author": "base", "text": "B1.\n\n"}
    json.dumps(rows)  # plain values: a JSONL line each


async def test_router_judge_escalates_at_tau_without_base_judging():
    draft = ScriptedEndpoint("draft", draft_handler)
    base = ScriptedEndpoint("base", base_handler)
    router = FakeRouter()
    graph = create_specreason_graph(draft, base, judge=RouterJudge(router, tau=0.5))
    out = await graph.ainvoke(QUESTION)
    assert [s["decision"] for s in out["steps"]] == ["accepted", "rewritten", "accepted"]
    assert base.judge_calls() == []  # the router judges; the base only rewrites
    assert len(base.generation_calls()) == 1
    assert out["steps"][1]["verdict"]["p_escalate"] == pytest.approx(0.9)
    # the router read the question, the tagged prefix and the draft step, cut to its window
    assert router.texts[2] == router_text(
        "What is 12*7?",
        [{"author": "draft", "text": "D0."}, {"author": "base", "text": "B1."}],
        "D2 so 84.",
    )
    assert router.truncates == [512, 512, 512]


async def test_router_tau_bounds_and_extremes():
    with pytest.raises(ConfigError, match="tau"):
        RouterJudge(FakeRouter(), tau=1.5)
    draft = ScriptedEndpoint("draft", draft_handler)
    base = ScriptedEndpoint("base", base_handler)
    graph = create_specreason_graph(draft, base, judge=RouterJudge(FakeRouter(), tau=0.0))
    out = await graph.ainvoke(QUESTION)  # p >= 0 always: every step escalated
    assert {s["decision"] for s in out["steps"]} == {"rewritten"}


def test_router_from_folder_needs_router_json(tmp_path):
    with pytest.raises(ConfigError, match=r"router\.json"):
        RouterJudge.from_folder(FakeRouter(), tmp_path)
    (tmp_path / "router.json").write_text(json.dumps({"max_tokens": 128, "tag_authors": False}))
    judge = RouterJudge.from_folder(FakeRouter(), tmp_path, tau=0.3)
    assert (judge.max_tokens, judge.tag_authors, judge.tau) == (128, False, 0.3)


def test_router_text_tags_authors_and_marks_empty_prefix():
    text = router_text("Q?", [], "Step.")
    assert text == "Question: Q?\n\nReasoning so far:\n(none)\n\nNext step (draft):\nStep."
    assert "[base] B." in router_text("Q?", [{"author": "base", "text": "B.\n\n"}], "S.")
    assert "[base]" not in router_text(
        "Q?", [{"author": "base", "text": "B."}], "S.", tag_authors=False
    )


def test_arbitrage_and_oracle_runs():
    runs = expand_runs(
        ["base", "specreason", "arbitrage", "oracle"], [7.0], ["greedy"], parse_taus("0.3,0.5"), 0.5
    )
    assert runs == [
        Run("base"),
        Run("specreason", 7.0, "greedy"),
        Run("arbitrage", 0.3),
        Run("arbitrage", 0.5),
        Run("oracle", 0.5, "average"),
    ]
    assert Run("arbitrage", 0.5).label == "arbitrage tau=0.5"
    for bad in ("1.5", "x", ""):
        with pytest.raises(ConfigError, match="tau"):
            parse_taus(bad)


async def test_label_problems_concurrently_then_resume(tmp_path):
    from langchain_specreason.lab.shared.datasets import Problem
    from langchain_specreason.lab.training.label import label_problems

    problems = [Problem(f"p{i}", f"What is 12*{i}?", str(12 * i), "number") for i in range(3)]
    draft = ScriptedEndpoint("draft", draft_handler)
    base = ScriptedEndpoint("base", base_handler)
    summary = await label_problems(
        draft,
        base,
        problems,
        tmp_path,
        config=SpecReasonConfig(),
        settings=OracleSettings(concurrency=2),
        progress=False,
    )
    assert (summary.problems_done, summary.steps, summary.escalated) == (3, 9, 3)
    lines = [json.loads(x) for x in (tmp_path / "labels.jsonl").read_text().splitlines()]
    assert sorted((r["problem_id"], r["step_index"]) for r in lines) == [
        (f"p{i}", j) for i in range(3) for j in range(3)
    ]
    assert {r["question"] for r in lines if r["problem_id"] == "p2"} == {"What is 12*2?"}
    calls = len(base.requests)
    again = await label_problems(
        draft, base, problems, tmp_path, config=SpecReasonConfig(), progress=False
    )
    assert (again.problems_done, again.problems_skipped) == (0, 3)
    assert len(base.requests) == calls  # nothing redone
    with pytest.raises(ConfigError, match="concurrency: Input should be greater than or equal"):
        OracleSettings(concurrency=0)


class ScoringBase(ScriptedEndpoint):
    """The scripted base, plus token scoring: one token per character, digits after 'wrong'
    in a step unlikely (the likelihood scorer's reading of a wrong step)."""

    def __init__(self) -> None:
        super().__init__("base", base_handler)
        self.scored: list[str] = []

    async def tokenize(self, messages, *, continue_final=False):
        text = "".join(str(m["content"]) for m in messages) + ("" if continue_final else "|")
        return [ord(c) for c in text]

    async def prompt_logprobs(self, token_ids, *, read_cache=True):
        from langchain_specreason.endpoint import PromptLogprobs

        text = "".join(chr(t) for t in token_ids)
        self.scored.append(text)
        last = text.rsplit("\n\n", 2)[-2] if text.count("\n\n") >= 2 else text
        low = "wrong" in last
        values = [None] + [-6.0 if low and chr(t).isdigit() else -0.1 for t in token_ids[1:]]
        return PromptLogprobs(
            values,
            [None] + [chr(t) for t in token_ids[1:]],
            prompt_tokens=len(token_ids),
            cached_tokens=0,
            seconds=0.01,
        )


async def test_label_with_the_likelihood_scorer(tmp_path):
    from langchain_specreason.lab.shared.datasets import Problem
    from langchain_specreason.lab.training.label import label_problems

    problems = [Problem("p0", "What is 12*7?", "84", "number")]
    base = ScoringBase()
    summary = await label_problems(
        ScriptedEndpoint("draft", draft_handler),
        base,
        problems,
        tmp_path,
        config=SpecReasonConfig(),
        settings=OracleSettings(scorer="likelihood"),
        progress=False,
    )
    rows = [json.loads(x) for x in (tmp_path / "labels.jsonl").read_text().splitlines()]
    assert summary.steps == len(rows) == 3
    assert not any(is_judge(r) for r in base.requests)  # no 0-9 judge call: token scoring
    assert base.scored  # both steps of each position were scored by their token logprobs
    for row in rows:
        assert row["advantage"] == pytest.approx(row["base_score"] - row["draft_score"])
        assert row["draft_score"] <= 0 and row["base_score"] <= 0


def test_label_rejects_an_unknown_scorer():
    with pytest.raises(ConfigError, match="scorer: Input should be 'score' or 'likelihood'"):
        OracleSettings(scorer="vibes")
