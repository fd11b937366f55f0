"""Each agreement rule on labelled draft steps: steps kept, harmful among kept, harmful caught.

A labels file of ``specreason label`` holds, at every drafted position, the draft's step, the
base model's own step there (``base_step``, one greedy rollout's first step) and whether the
draft step was harmful (the base model's rollouts did worse from it). A rule run on the pair
``(step, base_step)`` is what the ``agree`` mode decides at that position, so the rule's
precision can be read offline, in seconds, before any server runs.

``specreason bench agreement --labels FILE --out DIR`` writes ``summary.json`` and
``summary.md``: per rule, the share of steps kept (Wilson 95% interval), the harmful share among
the kept ones, and how many harmful steps it catches.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ...agreement import make_rule, rule_specs
from ...config import SpecReasonConfig, add_config_flags
from ...errors import InputError
from ..shared.datasets import read_jsonl
from ..shared.stats import wilson

REQUIRED = ("step", "base_step", "harmful")


@dataclass(frozen=True)
class RuleReading:
    """One rule on one labels file."""

    rule: str
    steps: int
    kept: int
    kept_low: float
    kept_high: float
    harmful: int
    harmful_kept: int
    harmful_kept_low: float
    harmful_kept_high: float

    @property
    def kept_share(self) -> float:
        """Share of the draft steps the rule keeps."""
        return self.kept / self.steps if self.steps else 0.0

    @property
    def harmful_kept_share(self) -> float:
        """Share of the kept steps that are harmful."""
        return self.harmful_kept / self.kept if self.kept else 0.0


def read_pairs(path: Path) -> list[tuple[str, str, bool]]:
    """``(draft step, base step, harmful)`` of each line; InputError naming a bad line."""
    pairs = []
    for number, row in read_jsonl(path, REQUIRED):
        step, base, harmful = row["step"], row["base_step"], row["harmful"]
        if not isinstance(step, str) or not isinstance(base, str) or not isinstance(harmful, bool):
            raise InputError(
                f"{path}, line {number}: step and base_step must be strings, harmful true/false"
            )
        pairs.append((step, base, harmful))
    if not pairs:
        raise InputError(f"{path} holds no labelled step")
    return pairs


def read_rule(
    name: str, pairs: Sequence[tuple[str, str, bool]], settings: Mapping[str, Any]
) -> RuleReading:
    """Rule ``name`` (with ``settings``, a config's fields) on the labelled pairs."""
    rule = make_rule(name, settings)
    kept = [harmful for step, base, harmful in pairs if rule.agree(step, base).agree]
    harmful_kept = sum(kept)
    return RuleReading(
        rule=name,
        steps=len(pairs),
        kept=len(kept),
        kept_low=wilson(len(kept), len(pairs))[0],
        kept_high=wilson(len(kept), len(pairs))[1],
        harmful=sum(h for _, _, h in pairs),
        harmful_kept=harmful_kept,
        harmful_kept_low=wilson(harmful_kept, len(kept))[0],
        harmful_kept_high=wilson(harmful_kept, len(kept))[1],
    )


def summary_md(readings: Sequence[RuleReading], labels: Path, settings: Mapping[str, Any]) -> str:
    """The readings as a Markdown table."""
    lines = [
        f"# Agreement rules on {labels}",
        "",
        f"agree_overlap = {settings['agree_overlap']}",
        "",
        "| rule | kept | kept share [95%] | harmful among kept [95%] | harmful caught |",
        "|---|---|---|---|---|",
    ]
    for r in readings:
        lines.append(
            f"| `{r.rule}` | {r.kept}/{r.steps} | {r.kept_share:.1%} "
            f"[{r.kept_low:.1%}, {r.kept_high:.1%}] | {r.harmful_kept}/{r.kept} = "
            f"{r.harmful_kept_share:.1%} [{r.harmful_kept_low:.1%}, {r.harmful_kept_high:.1%}] "
            f"| {r.harmful - r.harmful_kept}/{r.harmful} |"
        )
    return "\n".join(lines) + "\n"


def write_report(labels: Path, out: Path, rules: Sequence[str], config: SpecReasonConfig) -> str:
    """Read every rule on ``labels``; write summary.json and summary.md to ``out``."""
    pairs = read_pairs(labels)
    settings = config.as_dict()
    readings = [read_rule(name, pairs, settings) for name in rules]
    out.mkdir(parents=True, exist_ok=True)
    summary = {
        "labels": str(labels),
        "agree_overlap": settings["agree_overlap"],
        "rules": [
            {**asdict(r), "kept_share": r.kept_share, "harmful_kept_share": r.harmful_kept_share}
            for r in readings
        ],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    text = summary_md(readings, labels, settings)
    (out / "summary.md").write_text(text)
    return text


def add_parser(subparsers: Any) -> None:
    """``specreason bench agreement``."""
    p = subparsers.add_parser(
        "agreement",
        help="the agreement rules read on labelled draft steps (no server, seconds)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("--labels", required=True, help="a labels.jsonl of `specreason label`")
    p.add_argument("--out", required=True, help="folder for summary.json and summary.md")
    p.add_argument(
        "--rules",
        default=",".join(rule_specs()),
        help=f"comma-separated rules (default: all): {', '.join(rule_specs())}",
    )
    add_config_flags(p, ["agree_overlap"])


def run(args: argparse.Namespace) -> int:
    """Run ``specreason bench agreement``."""
    rules = [name.strip() for name in args.rules.split(",") if name.strip()]
    config = SpecReasonConfig(agree_overlap=args.agree_overlap, agree_rule=rules[0])
    for name in rules:
        config.replace(agree_rule=name)  # ConfigError naming an unknown rule
    print(write_report(Path(args.labels), Path(args.out), rules, config), end="")
    return 0
