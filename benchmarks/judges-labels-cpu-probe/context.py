"""Exploratory: the step's likelihood without the question (session 21; not a library measure).

For each step of ``probe.py``'s dev sample, on the base and on the draft server: the step's
token log-probabilities after the trace with the question replaced by "(the problem is not
shown)" (``noq``), and after that user turn alone, no earlier step (``bare``). The readings
set them against each server's plain likelihood of the step with everything before it
(session 18's ``likelihood`` / ``confidence`` means of the same steps, read from
``../judges-labels-cpu-s18/dev/results.jsonl``): a step the question does not support would
lose little without it.

    python benchmarks/judges-labels-cpu-probe/context.py probe   # -> dev-context.jsonl (resumes)
    python benchmarks/judges-labels-cpu-probe/context.py report  # -> context-report.json
"""

import asyncio
import json
import sys
from dataclasses import replace

import probe
from langchain_specreason.endpoint import endpoint_pair
from langchain_specreason.formats import continue_messages, get_format
from langchain_specreason.lab.bench.judgebench import conversation
from langchain_specreason.lab.bench.labelreport import auroc, auroc_interval

ROWS = probe.HERE / "dev-context.jsonl"
S18 = probe.HERE.parent / "judges-labels-cpu-s18" / "dev" / "results.jsonl"


async def step_logprobs(endpoint, fmt, conv, steps, step):
    m0, c0 = continue_messages(conv, fmt, list(steps))
    m1, c1 = continue_messages(conv, fmt, [*steps, step])
    before = await endpoint.tokenize(m0, continue_final=c0)
    after = await endpoint.tokenize(m1, continue_final=c1)
    got = await endpoint.prompt_logprobs(after, read_cache=False)
    return [v for v in got.logprobs[len(before):] if v is not None]


async def run():
    examples = probe.sample(probe.load_labelled_steps(probe.LABELS))
    examples = examples[60:] + examples[:60]  # the harmful-rich part first
    done = {json.loads(line)["id"] for line in ROWS.open()} if ROWS.exists() else set()
    draft, base = endpoint_pair("http://127.0.0.1:8201/v1", "http://127.0.0.1:8202/v1")
    fmt = get_format("instruct")
    with ROWS.open("a") as out:
        for ex in examples:
            if ex.id in done:
                continue
            row = {"id": ex.id, "harmful": ex.kind == "harmful"}
            hidden = conversation(replace(ex, question="(the problem is not shown)"))
            for name, endpoint in (("base", base), ("draft", draft)):
                row[name] = {
                    "noq": await step_logprobs(endpoint, fmt, hidden, ex.steps, ex.step),
                    "bare": await step_logprobs(endpoint, fmt, hidden, [], ex.step),
                }
            out.write(json.dumps(row) + "\n")
            out.flush()


def mean(values):
    return sum(values) / len(values) if values else 0.0


def report():
    rows = [json.loads(line) for line in ROWS.open()]
    harmful = {r["id"]: r["harmful"] for r in rows}
    full = {}
    for line in S18.open():
        rec = json.loads(line)
        if rec["measure"] in ("likelihood", "confidence") and rec["example"] in harmful:
            full[("base" if rec["measure"] == "likelihood" else "draft", rec["example"])] = rec[
                "scores"
            ]["mean"]
    readings = {}
    for who in ("base", "draft"):
        readings[f"{who}: likelihood of the step (session 18's read)"] = {
            r["id"]: full[(who, r["id"])] for r in rows
        }
        readings[f"{who}: likelihood without the question"] = {
            r["id"]: mean(r[who]["noq"]) for r in rows
        }
        readings[f"{who}: likelihood of the step alone"] = {
            r["id"]: mean(r[who]["bare"]) for r in rows
        }
        readings[f"{who}: gain from the question (with - without)"] = {
            r["id"]: full[(who, r["id"])] - mean(r[who]["noq"]) for r in rows
        }
        readings[f"{who}: gain from the context (with - alone)"] = {
            r["id"]: full[(who, r["id"])] - mean(r[who]["bare"]) for r in rows
        }
    result = {"steps": len(rows), "harmful": sum(harmful.values()), "readings": {}}
    for name, scores in readings.items():
        ok = [s for e, s in scores.items() if not harmful[e]]
        bad = [s for e, s in scores.items() if harmful[e]]
        result["readings"][name] = {
            "auroc": auroc(ok, bad),
            "interval": auroc_interval(scores, harmful),
        }
    (probe.HERE / "context-report.json").write_text(json.dumps(result, indent=1) + "\n")
    for name, r in result["readings"].items():
        print(f"{name:55s} {r['auroc']:.3f} [{r['interval'][0]:.2f}, {r['interval'][1]:.2f}]")


if __name__ == "__main__":
    asyncio.run(run()) if sys.argv[1:] == ["probe"] else report()
