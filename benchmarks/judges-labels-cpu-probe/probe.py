"""Exploratory answer probe on dev rollout labels (session 21; not a library measure).

After the trace before a labelled step (``b0``), after the trace with the draft's step
(``b1``, base server) and the same on the draft server (``d1``), the model is asked for the
final answer with ``Therefore, the final answer is $\\boxed{`` appended (greedy, at most 12
tokens, stopped at ``}``); each probe records the answer text and its token log-probabilities.

Run (both servers of ``specreason serve --profile cpu`` up)::

    python benchmarks/judges-labels-cpu-probe/probe.py probe   # -> dev-probes.jsonl (resumes)
    python benchmarks/judges-labels-cpu-probe/probe.py report  # -> report.json

The sample: the first 60 steps of a seeded uniform sample of the dev labels (seed 1; the run
was stopped there: 4 of them harmful), then every other harmful dev step and 40 more harmless ones
(seed 1). Dev only; the held-out labels are not read.
"""

import asyncio
import json
import random
import re
import sys
from pathlib import Path

from langchain_specreason.endpoint import ChatRequest, endpoint_pair
from langchain_specreason.formats import continue_messages, get_format
from langchain_specreason.lab.bench.judgebench import conversation
from langchain_specreason.lab.bench.labelreport import auroc, auroc_interval
from langchain_specreason.lab.labels.labelfile import load_labelled_steps

HERE = Path(__file__).parent
LABELS = HERE.parent / "labels-cpu" / "dev" / "labels.jsonl"
PROBES = HERE / "dev-probes.jsonl"
PROBE = "Therefore, the final answer is $\\boxed{"


async def probe(endpoint, fmt, example, steps):
    messages, cont = continue_messages(conversation(example), fmt, [*steps, PROBE])
    c = await endpoint.complete(
        ChatRequest(messages=messages, max_tokens=12, continue_final=cont, stop=["}"],
                    logprobs=True, top_logprobs=5)
    )
    lps = c.token_logprobs or []
    return {
        "text": c.text.strip(),
        "mean": sum(lps) / len(lps) if lps else 0.0,
        "first": lps[0] if lps else 0.0,
        "min": min(lps) if lps else 0.0,
    }


def sample(examples):
    first = random.Random(1).sample(examples, 160)[:60]
    done = {e.id for e in first}
    rnd = random.Random(1)
    harmful = [e for e in examples if e.kind == "harmful"]
    harmless = [e for e in examples if e.kind != "harmful"]
    rest = [e for e in harmful + rnd.sample(harmless, 40) if e.id not in done]
    return first + rest


async def run_probes():
    examples = sample(load_labelled_steps(LABELS))
    done = {json.loads(line)["id"] for line in PROBES.open()} if PROBES.exists() else set()
    draft, base = endpoint_pair("http://127.0.0.1:8201/v1", "http://127.0.0.1:8202/v1")
    fmt = get_format("instruct")
    with PROBES.open("a") as out:
        for example in examples:
            if example.id in done:
                continue
            row = {
                "id": example.id,
                "harmful": example.kind == "harmful",
                "adv": example.advantage,
                "b0": await probe(base, fmt, example, example.steps),
                "b1": await probe(base, fmt, example, [*example.steps, example.step]),
                "d1": await probe(draft, fmt, example, [*example.steps, example.step]),
            }
            out.write(json.dumps(row) + "\n")
            out.flush()


def answer(text):
    found = re.findall(r"-?\d+(?:\.\d+)?", text.replace(",", ""))
    return found[0] if found else text


READINGS = {
    "base answer confidence after the step (mean logprob)": lambda r: r["b1"]["mean"],
    "base answer confidence after the step (first token)": lambda r: r["b1"]["first"],
    "base answer confidence after the step (least token)": lambda r: r["b1"]["min"],
    "draft answer confidence after the step (mean logprob)": lambda r: r["d1"]["mean"],
    "base answer unchanged by the step (1/0)": lambda r: float(answer(r["b0"]["text"]) == answer(r["b1"]["text"])),
    "base and draft answers agree after the step (1/0)": lambda r: float(answer(r["d1"]["text"]) == answer(r["b1"]["text"])),
    "base confidence gain from the step": lambda r: r["b1"]["mean"] - r["b0"]["mean"],
}


def report():
    rows = [json.loads(line) for line in PROBES.open()]
    harmful = {r["id"]: r["harmful"] for r in rows}
    # the same steps under the default judge's likelihood reading (session 18's dev read)
    s18 = HERE.parent / "judges-labels-cpu-s18" / "dev" / "results.jsonl"
    mean = {}
    for line in s18.open():
        rec = json.loads(line)
        if rec["measure"] == "likelihood" and rec["example"] in harmful:
            mean[rec["example"]] = rec["scores"]["mean"]
    readings = {name: {r["id"]: f(r) for r in rows} for name, f in READINGS.items()}
    readings["likelihood (mean), session 18's read of the same steps"] = mean
    result = {"steps": len(rows), "harmful": sum(harmful.values()), "readings": {}}
    for name, scores in readings.items():
        ok = [s for e, s in scores.items() if not harmful[e]]
        bad = [s for e, s in scores.items() if harmful[e]]
        result["readings"][name] = {"auroc": auroc(ok, bad), "interval": auroc_interval(scores, harmful)}
    (HERE / "report.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    if sys.argv[1:] == ["probe"]:
        asyncio.run(run_probes())
    else:
        report()
