"""What a decision could win on a served pair: the probe's judge ceiling, decision for free.

``specreason bench agreement --probe SUMMARY`` puts a speed ceiling beside every decision of
the table (the oracle, the router, the judges) read from a ``specreason probe`` summary of the
pair: a decision that sends a share ``r`` of the steps to the base model (its "base writes:
steps") runs at most at the probe's judge ceiling (:mod:`..probe.ceilings`)::

    plain base: 1 / (c + v + r)          sd base: sd / (c' + v' + r)

with the decision itself costing nothing (``v = v' = 0``): a router, judge or oracle call only
lowers it, and so do each request's prefill and overhead, so a decision whose ceiling is not
above the reference (``sd`` when the probe measured it faster than the base, else the base) by
more than the probe's noise band cannot beat it on that pair, however well it decides. Every
speed is the probe's, at the load it was read at (``probe.load``, one request at a time for
probes before the load). Agreement rules are left out: the base writes at every position, in
parallel with the draft, which the probe's agreement ceilings model instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


class Decided(Protocol):
    """What a ceiling reads of a decision (a :class:`~.report.DecisionReading`)."""

    @property
    def row(self) -> str:
        """The decision's name."""
        ...

    @property
    def kind(self) -> str:
        """``oracle``, ``rule``, ``judge`` or ``router``."""
        ...

    @property
    def chosen(self) -> str:
        """How its threshold was set."""
        ...

    @property
    def base_steps(self) -> float:
        """Share of positions at which the base writes a step."""
        ...


@dataclass(frozen=True)
class PairSpeeds:
    """The probe's speeds a ceiling needs, at its load."""

    source: str
    """The probe summary read."""
    load: int
    """Requests at once the speeds were read at."""
    c: float
    """The draft's cost per token over the plain base's."""
    sd: float | None
    """``sd``'s speed-up over the plain base (None: not measured)."""
    c_sd: float | None
    """The draft's cost per token over the ``sd`` base's."""
    noise: float
    """The probe's noise band (relative)."""

    @property
    def reference(self) -> tuple[str, float]:
        """(name, speed-up) of what a decision must beat: ``sd`` when faster, else the base."""
        if self.sd is not None and self.sd > 1.0:
            return "sd", self.sd
        return "base", 1.0

    def plain(self, base_share: float) -> float:
        """The ceiling on the plain base when the base writes ``base_share`` of the steps."""
        return 1.0 / (self.c + base_share)

    def on_sd(self, base_share: float) -> float | None:
        """The same on the ``sd`` base (None when the probe measured no ``sd``)."""
        if self.sd is None or self.c_sd is None:
            return None
        return self.sd / (self.c_sd + base_share)

    def beats(self, value: float | None) -> bool:
        """Whether ``value`` is above the reference by more than the noise band."""
        return value is not None and value > self.reference[1] * (1.0 + self.noise)

    def largest_base_share(self) -> float:
        """The largest base share whose better ceiling still beats the reference.

        Above the reference by more than the noise band; 0 or less: no share can.
        """
        target = self.reference[1] * (1.0 + self.noise)
        plain = 1.0 / target - self.c
        if self.sd is None or self.c_sd is None:
            return plain
        return max(plain, self.sd / target - self.c_sd)


def read_speeds(path: Path) -> PairSpeeds:
    """The speeds of a ``specreason probe`` summary.json; ConfigError naming a bad file."""
    from ..probe.ceilings import ceilings, reading_probe
    from ..probe.report import load, measured_of

    with reading_probe(path) as where:
        c = ceilings(measured_of(load(where)))
    return PairSpeeds(str(path), c.load, c.c, c.sd, c.c_sd, c.noise)


def ceiling_rows(readings: Sequence[Decided], speeds: PairSpeeds) -> list[dict[str, Any]]:
    """Each decision but the rules: its base share and ceilings, and whether one beats."""
    out = []
    for r in readings:
        if r.kind == "rule":
            continue
        plain, on_sd = speeds.plain(r.base_steps), speeds.on_sd(r.base_steps)
        out.append(
            {
                "decision": r.row,
                "chosen": r.chosen,
                "base_steps": r.base_steps,
                "plain": plain,
                "on_sd": on_sd,
                "beats_reference": speeds.beats(plain) or speeds.beats(on_sd),
            }
        )
    return out


def ceiling_md(rows: Sequence[dict[str, Any]], speeds: PairSpeeds) -> str:
    """The ceilings as a Markdown section."""
    name, ref = speeds.reference
    load = "one request at a time" if speeds.load == 1 else f"{speeds.load} requests at once"
    sd = "" if speeds.sd is None else f", sd {speeds.sd:.2f}x, c' = {speeds.c_sd:.3f}"
    lines = [
        f"## Speed ceilings on the probed pair ({speeds.source}, {load})",
        "",
        f"Each decision costing nothing (c = {speeds.c:.3f}{sd}); the reference is `{name}` at "
        f"{ref:.2f}x the base, beaten only above {ref * (1 + speeds.noise):.2f}x (noise band "
        f"{speeds.noise:.0%}). A decision beats it only if the base writes at most "
        f"{max(0.0, speeds.largest_base_share()):.1%} of the steps.",
        "",
        "| decision | threshold chosen | base writes | ceiling, plain base | ceiling, sd base "
        "| beats the reference |",
        "|---|---|--:|--:|--:|---|",
    ]
    for row in rows:
        on_sd = "-" if row["on_sd"] is None else f"{row['on_sd']:.2f}x"
        lines.append(
            f"| {row['decision']} | {row['chosen']} | {row['base_steps']:.1%} "
            f"| {row['plain']:.2f}x | {on_sd} | {'yes' if row['beats_reference'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"


__all__ = ["Decided", "PairSpeeds", "ceiling_md", "ceiling_rows", "read_speeds"]
