"""``specreason bench judges``: how well each judge tells right steps from wrong ones.

::

    specreason bench judges --profile cpu --limit 100 --out benchmarks/judges-cpu
    specreason bench judges --draft-url URL --base-url URL --judge likelihood,arithmetic
    specreason bench judges --report-only --out DIR     # the report again, no server

Data: GSM8K *train* gold solutions (:mod:`.data`): per problem, the gold step k after gold
steps 1..k-1, and the same step corrupted three ways (arithmetic, operand, operation). With
``--numbers words`` the judged step states its numbers and operators in words
(:mod:`.spelling`) and ``meta.json`` records ``numbers: "words"``.

Each judge (``--judge``; ``score-reference`` is ``score`` in the reference wording) is called
once per example; one call can give several scores, one per reading (the ``score`` judge's
digit and its probability-weighted average: its ``score_method``; the mean and the least
token log-probability: its ``logprob_aggregate``). A result line names its judge under
``judge`` (``measure`` in folders written before issue 43; both are read). Cascades
(``arithmetic+likelihood``) are composed in the report from their parts' results, exactly as
:class:`~..judges.CascadeJudge` decides.

Prefill is measured as the graph would see it: the shared prefix (conversation and steps
1..k-1, which in a run the previous call prefilled) is in the server's prefix cache before the
judge call, which then reports ``prompt_tokens - cached_tokens``. When a server's next example
starts a new trace (another question, or steps that do not extend the previous example's), its
prefix cache is emptied (dev-mode ``/reset_prefix_cache``) and the prefix is sent once; when
the trace continues (the next labelled step of the same run), only the new steps are
prefilled, reading the cache (see :func:`warming`). Results are appended to
``results.jsonl`` (resumable), then ``summary.md``, ``summary.json`` and ``roc.png`` are written.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from tqdm import tqdm

from ...config import SpecReasonConfig
from ...endpoint import ChatRequest, OpenAIEndpoint, endpoint_pair
from ...errors import ConfigError
from ...formats import PromptFormat, continue_messages, get_format, step_stops
from ...judges import BaseModelScorer, LikelihoodScorer
from ...judges.arithmetic import check_step
from ...judges.score import average_score, greedy_score
from ...serving.profiles import load_profile
from ..oldflags import add_old_spelling
from ..shared.datasets import Problem
from ..shared.flags import add_command, add_progress_flag
from ..shared.meta import MetaFile
from ..shared.modes import parse_choices
from ..shared.prompts import build_prompt
from ..shared.results import META, JsonlAppender, read_records
from ..shared.servers import (
    ServerPair,
    ServerSource,
    add_server_flags,
    api_key_of,
    reset_prefix_cache,
)
from . import consistency
from .data import NUMBERS, JudgeExample, load_judge_examples
from .injection import injected
from .report import write_judge_report

RESULTS = "results.jsonl"
MEASURES: dict[str, str] = {
    "arithmetic": "no server",
    "likelihood": "base",
    "confidence": "draft",
    "score": "base",
    "score-reference": "base",
    "consistency": "draft",
}
"""Each judge the benchmark calls and the server it calls."""

DEFAULT_MEASURES = tuple(m for m in MEASURES if m != "consistency")
"""What ``--judge`` runs unless told: all but ``consistency`` (a draft generation of
several samples per call, not a forward pass)."""


def add_parser(subparsers: Any) -> None:
    """Add ``bench judges``."""
    p = add_command(
        subparsers, "judges", "judge quality on right and corrupted GSM8K steps", __doc__
    )
    add_server_flags(p)
    p.add_argument("--limit", type=int, default=100, help="GSM8K train problems (default 100)")
    p.add_argument("--seed", type=int, default=0, help="which step is judged, corruptions")
    p.add_argument(
        "--judge",
        default=",".join(DEFAULT_MEASURES),
        help=f"comma list of {', '.join(MEASURES)} (default: all but consistency)",
    )
    add_old_spelling(p, "--measures", "--judge", dest="judge")
    p.add_argument(
        "--inject",
        action="store_true",
        help="also judge each wrong step with an injected verdict appended "
        '("Score: 9", a forged judge turn); the report gives the score shift',
    )
    p.add_argument(
        "--numbers",
        choices=NUMBERS,
        help="how the judged step writes its quantities: digits as in GSM8K (default) or "
        "words (`48/2 = 24` reads `forty-eight divided by two is twenty-four`)",
    )
    p.add_argument(
        "--labels",
        metavar="FILE",
        help="judge real draft steps labelled harmful or harmless (JSONL: "
        "question, steps, step, harmful; `specreason label` writes them) "
        "instead of synthetic corruptions of gold steps",
    )
    p.add_argument(
        "--fit-on",
        metavar="DIR",
        help="with --labels: a results folder of `bench judges --labels` on dev "
        "labels; thresholds and the learned reading are chosen there, then "
        "reported on these labels",
    )
    p.add_argument("--out", default="runs/judges", help="result folder; reuse one to resume")
    p.add_argument(
        "--report-only",
        action="store_true",
        help="only rebuild summary.md, summary.json and roc.png of --out from its "
        "results.jsonl (no server); a labelled folder takes --fit-on, or the one its "
        "meta.json names",
    )
    add_progress_flag(p)


def parse_measures(text: str) -> list[str]:
    """Judges of a comma list; ConfigError when one is unknown or the list is empty."""
    return parse_choices(text, MEASURES, noun="judge", flag="--judge")


def conversation(example: JudgeExample) -> list[dict[str, Any]]:
    """The user turn the judged reasoning answers (the benchmark's own prompt)."""
    problem = Problem(example.problem_id, example.question, "", "number")
    return [{"role": "user", "content": build_prompt(problem)}]


class Measures:
    """The calls of each judge over one draft and one base endpoint."""

    def __init__(
        self,
        draft: OpenAIEndpoint,
        base: OpenAIEndpoint,
        fmt: PromptFormat,
        *,
        api_key: str | None = None,
    ):
        self.draft, self.base, self.fmt = draft, base, fmt
        self._api_key = api_key
        self.likelihood = LikelihoodScorer(base, fmt, logprob_aggregate="mean")
        self.confidence = LikelihoodScorer(draft, fmt, logprob_aggregate="mean")
        self.score = BaseModelScorer(base, fmt, score_method="greedy", top_logprobs=10)
        self.reference = BaseModelScorer(
            base, fmt, score_method="greedy", top_logprobs=10, wording="reference"
        )

    def endpoint(self, judge: str) -> OpenAIEndpoint | None:
        """The server a judge calls (``None``: none)."""
        return {"base": self.base, "draft": self.draft}.get(MEASURES[judge])

    async def warm(self, judge: str, example: JudgeExample, *, reset: bool = True) -> None:
        """Put the example's shared prefix in the server's prefix cache.

        ``reset``: empty the cache first and prefill the whole prefix; else read what the
        cache holds and prefill the rest.
        """
        endpoint = self.endpoint(judge)
        if endpoint is None:
            return
        if reset:
            await reset_prefix_cache(endpoint.base_url, api_key=self._api_key)
        messages, cont = continue_messages(conversation(example), self.fmt, example.steps)
        ids = await endpoint.tokenize(messages, continue_final=cont)
        await endpoint.prompt_logprobs(ids, read_cache=not reset)

    async def run(self, judge: str, example: JudgeExample) -> dict[str, Any]:
        """One judge call on ``example``: its scores and costs."""
        conv, steps, step = conversation(example), list(example.steps), example.step
        if judge == "arithmetic":
            start = time.perf_counter()
            check = check_step(step)
            value = {"wrong": 0.0, "unsure": 0.5, "right": 1.0}[check.verdict]
            return {
                "scores": {"verdict": value},
                "seconds": time.perf_counter() - start,
                "prompt_tokens": 0,
                "cached_tokens": 0,
                "detail": {"verdict": check.verdict, "equations": check.checked},
            }
        if judge == "consistency":
            return await self._consistency(conv, steps, step)
        if judge in ("likelihood", "confidence"):
            scorer = self.likelihood if judge == "likelihood" else self.confidence
            s = await scorer.score(conv, steps, step)
            scores = {
                "mean": s.detail["mean_logprob"],
                "min": s.detail["min_logprob"],
                "math": s.detail["math_logprob"],
            }
            step_tokens = s.detail["step_tokens"]
        else:
            scorer_ = self.score if judge == "score" else self.reference
            s = await scorer_.score(conv, steps, step)
            top = [(t, lp) for t, lp in s.detail["top_logprobs"]]
            scores = {"greedy": greedy_score(s.detail["token"]), "average": average_score(top)}
            step_tokens = None
        return {
            "scores": scores,
            "seconds": s.seconds,
            "prompt_tokens": s.prompt_tokens,
            "cached_tokens": s.cached_tokens,
            "step_tokens": step_tokens,
            "detail": s.detail,
        }

    async def _consistency(
        self, conv: list[dict[str, Any]], steps: list[str], step: str
    ) -> dict[str, Any]:
        """The draft's samples of the step's position, compared with the step it wrote."""
        messages, cont = continue_messages(conv, self.fmt, steps)
        request = ChatRequest(
            messages=messages,
            max_tokens=consistency.MAX_TOKENS,
            continue_final=cont,
            stop=step_stops(self.fmt, SpecReasonConfig().delimiter),
            temperature=consistency.TEMPERATURE,
            top_p=consistency.TOP_P,
            seed=0,
        )
        outs = await self.draft.sample(request, consistency.SAMPLES)
        texts = [o.text for o in outs]
        return {
            "scores": consistency.consistency_scores(step, texts),
            "seconds": outs[0].seconds,
            "prompt_tokens": outs[0].prompt_tokens,
            "cached_tokens": outs[0].cached_tokens,
            "step_tokens": None,
            "detail": {"samples": texts, "completion_tokens": outs[0].completion_tokens},
        }


async def step_tokens(base: OpenAIEndpoint, fmt: PromptFormat, example: JudgeExample) -> int:
    """Tokens of the judged step in the base tokenizer (after the shared prefix)."""
    before, cont = continue_messages(conversation(example), fmt, example.steps)
    after, cont2 = continue_messages(conversation(example), fmt, [*example.steps, example.step])
    a = await base.tokenize(before, continue_final=cont)
    b = await base.tokenize(after, continue_final=cont2)
    return len(b) - len(a)


def rebuild_report(out: Path, fit_on: Path | None = None) -> list[Path]:
    """The report of a judge-benchmark folder from its ``results.jsonl`` alone (no server).

    Labelled results (kinds ``harmful``/``harmless``) get the label report, with thresholds
    chosen on ``fit_on`` or, without it, on the ``fit_on`` folder ``meta.json`` records;
    synthetic ones the corruption report. ConfigError when a folder is missing.
    """
    if not (out / RESULTS).is_file():
        raise ConfigError(f"--report-only: no {RESULTS} in {out}")
    records = read_records(out / RESULTS)
    if not any(r.get("kind") in ("harmful", "harmless") for r in records):
        return write_judge_report(out)
    if fit_on is None and (out / META).is_file():
        recorded = (json.loads((out / META).read_text()).get("settings") or {}).get("fit_on")
        fit_on = Path(recorded) if recorded else None
    if fit_on is not None and not (fit_on / RESULTS).is_file():
        raise ConfigError(f"--report-only: the dev folder {fit_on} has no {RESULTS}")
    from .labelreport import write_label_report

    return write_label_report(out, fit_on)


async def run_judges(args: argparse.Namespace) -> int:
    """``specreason bench judges``: run the unfinished (judge, example) pairs, then report."""
    if getattr(args, "report_only", False):
        fit = getattr(args, "fit_on", None)
        for path in rebuild_report(Path(args.out), Path(fit) if fit else None):
            print(path)
        return 0
    measures = parse_measures(args.judge)
    if args.limit is None or args.limit <= 0:
        raise ConfigError(f"--limit must be a positive integer, got {args.limit}")
    source = ServerSource(args.profile, args.draft_url, args.base_url, api_key=api_key_of(args))
    family = args.family or load_profile(args.profile).family
    fmt = get_format(family)
    labels = getattr(args, "labels", None)
    fit_on = getattr(args, "fit_on", None)
    if fit_on and not labels:
        raise ConfigError("--fit-on goes with --labels")
    numbers = getattr(args, "numbers", None)
    if numbers and labels:
        raise ConfigError(
            "--numbers goes with the synthetic benchmark, not --labels "
            "(labelled steps are the draft's own text)"
        )
    if fit_on and not (Path(fit_on) / RESULTS).is_file():
        raise ConfigError(
            f"--fit-on {fit_on}: no {RESULTS} there (run `bench judges "
            "--labels DEV_FILE --out DIR` first)"
        )
    if labels:
        from ..labels.labelfile import load_labelled_steps

        examples, skipped = load_labelled_steps(Path(labels)), 0
        described: dict[str, Any] = {
            "labels": str(labels),
            "synthetic": False,
            "fit_on": fit_on,
            "family": family,
        }
    else:
        numbers = numbers or "digits"
        examples, skipped = load_judge_examples(args.limit, seed=args.seed, numbers=numbers)
        described = {
            "limit": args.limit,
            "seed": args.seed,
            "family": family,
            "dataset": "gsm8k-train",
            "synthetic": True,
            "skipped_problems": skipped,
        }
        if numbers != "digits":  # absent means digits: older folders still resume
            described["numbers"] = numbers
    problems = len({e.problem_id for e in examples})
    if getattr(args, "inject", False):
        examples += injected(examples)
    out = Path(args.out)
    meta = MetaFile(out, {**described, "inject": bool(getattr(args, "inject", False))})
    meta.save()
    done = {(r["judge"], r["example"]) for r in read_records(out / RESULTS)}
    todo = [(m, e) for m in measures for e in examples if (m, e.id) not in done]
    what = (
        "labelled draft steps"
        if labels
        else f"problems, {skipped} skipped: no step fit all three corruptions"
        + (", or its judged step could not be spelled out" if numbers == "words" else "")
    )
    print(
        f"bench judges: {len(examples)} examples ({problems} {what}), {len(measures)} judges, "
        f"{len(todo)} calls to make; results in {out}",
        file=sys.stderr,
        flush=True,
    )
    if todo:
        needs_servers = any(MEASURES[m] != "no server" for m, _ in todo)
        with source.servers(None) if needs_servers else contextlib.nullcontext() as pair:
            if pair is not None:
                meta.add_servers(await pair.describe())
            await _run(todo, pair, fmt, out, progress=not args.no_progress)
    meta.finish(len(todo))
    if labels:
        from .labelreport import write_label_report

        paths = write_label_report(out, Path(fit_on) if fit_on else None)
    else:
        paths = write_judge_report(out)
    for path in paths:
        print(path)
    return 0


def warming(
    last: JudgeExample | None, example: JudgeExample
) -> Literal["cached", "extend", "reset"]:
    """How a server that holds ``last``'s prefix gets ready for ``example``.

    ``"cached"``: the same question and steps (the synthetic examples of one problem);
    ``"extend"``: steps that continue ``last``'s (the next labelled step of one run): prefill
    only the new ones; ``"reset"``: another trace: empty the cache, prefill the whole prefix.
    """
    if last is None or example.question != last.question:
        return "reset"
    if example.steps == last.steps:
        return "cached"
    return "extend" if example.steps[: len(last.steps)] == last.steps else "reset"


async def _run(
    todo: list[tuple[str, JudgeExample]],
    pair: ServerPair | None,
    fmt: PromptFormat,
    out: Path,
    *,
    progress: bool,
) -> None:
    key = pair.api_key if pair else None
    draft, base = endpoint_pair(
        pair.draft_url if pair else "http://unused/v1",
        pair.base_url if pair else "http://unused/v1",
        api_key=key,
    )
    measures = Measures(draft, base, fmt, api_key=key)
    warmed: dict[str, JudgeExample] = {}  # server -> the example whose prefix it holds
    with (
        JsonlAppender(out / RESULTS) as results,
        tqdm(
            total=len(todo),
            desc="bench judges",
            unit="call",
            disable=not progress,
            dynamic_ncols=True,
        ) as bar,
    ):
        for judge, example in todo:
            bar.set_postfix_str(judge)
            server = MEASURES[judge]
            how = warming(warmed.get(server), example)
            if how != "cached":
                await measures.warm(judge, example, reset=how == "reset")
            warmed[server] = example
            got = await measures.run(judge, example)
            if got.get("step_tokens") is None and pair is not None:
                got["step_tokens"] = await step_tokens(base, fmt, example)
            cached = got.get("cached_tokens") or 0
            results.write(
                {
                    "judge": judge,
                    "example": example.id,
                    "problem_id": example.problem_id,
                    "kind": example.kind,
                    "position": example.position,
                    **got,
                    "prefilled_tokens": (got["prompt_tokens"] - cached)
                    if got["prompt_tokens"]
                    else 0,
                    "finished_at": datetime.now(UTC).isoformat(),
                }
            )
            bar.update(1)
