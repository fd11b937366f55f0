"""Speed-up ceilings from measured speeds, and the probe's verdict (pure arithmetic).

Every speed-up is against the base model writing the same tokens alone, one stream, and
every ceiling leaves out what the probe does not count (each request's prefill and
overhead, the base's prefill of drafted text), so a real run is at most this fast.

Notation: ``t_d(N)``, ``t_b(N)``, ``t_s(N)``: seconds of one decode step of a batch of ``N``
streams on the draft, the base and the ``sd`` base server (:attr:`.speeds.Decode.step_s`);
``t_x = t_x(1)``. ``L``: tokens of a drafted step; ``J``: seconds of a judge call.

**Judge-based speculation** (SpecReason). Per step the draft writes it (``L t_d``), the judge
reads it (``J``), and a share ``r`` of steps is rewritten by the base (``L t_b`` each). The
base alone spends ``L t_b``. Per generated token, relative to the base::

    c = t_d / t_b        v = J / (L t_b)        r = 1 - acceptance
    speed-up = 1 / (c + v + r)          at most 1 / (c + v), every step accepted

On an ``sd`` base server the judge and the rewrites run there: with ``c' = t_d / t_s``,
``v' = J' / (L t_s)`` and ``sd = t_b / t_s``, the speed-up against the plain base is
``sd / (c' + v' + r)``.

**Verification by agreement** (Lookahead-style, issue "Agree instead of judge"). A round: the
draft writes ``N`` steps one after the other (``N L t_d``), then the base writes its own step
at each of the ``N`` positions in one batch of ``N`` concurrent requests (``L t_b(N)``). With
``k`` agreeing draft steps in a row the round keeps them and the base's own step at the first
disagreement: ``min(1 + k, N)`` steps, which the base alone writes in ``min(1 + k, N) L t_b``.
``L`` cancels::

    speed-up(k, N) = min(1 + k, N) t_b / (N t_d + t_b(N))
                   = min(1 + k, N) / (N c + b(N)),      b(N) = t_b(N) / t_b

``b(N)`` is how much more a batch of ``N`` costs than one request (1 when the server has idle
parallel capacity). The draft cannot write the next round ahead while a round is verified
unless every step agrees, so the round's parts add up (they do not overlap) when ``k < N``.
The ceiling at ``k`` is the best over the measured ``N >= k + 1`` (fewer steps in flight
cost less draft time). On an ``sd`` base server ``t_b(N)`` becomes ``t_s(N)``; the speed-up
is still against the plain base.

**Token SD** (``sd``): ``t_b / t_s``, measured directly.

**Noise band.** Every speed above is measured, and so is its noise: each decode measurement
runs ``--repeats`` times, the fastest is kept and the slowest is recorded
(:attr:`.speeds.Decode.spread`: slowest step over fastest, minus 1). A ceiling and its
reference are ratios of these speeds, whose relative errors add (to first order), so the
probe's *measured* noise is the sum of the one-stream spreads of the servers measured (draft,
base, ``sd``). The band is the larger of that and :data:`NOISE_FLOOR` (10%). The floor
stays whatever the repeats say, because: the default two repeats (one with ``--quick``) do
not estimate a spread; the judge's time is measured once, not repeated; the same bound on the
``cpu`` pair read 1.95x in one probe and 2.02x in another (3.5%, between runs, larger than
the spread within a run); and a ceiling leaves out prefill and overhead, so a real run falls
below it and a ceiling needs a clear edge to mean a win. The batch measurements' spreads
(``N > 1``) are recorded in ``summary.json`` but not added: the band is one number for the
whole probe.

A ceiling *beats* a reference (:func:`beats`) only when it is above it by more than the
band: ``ceiling > reference * (1 + noise)``. One above the reference by less is *within the
noise*: the probe cannot tell it from the reference.

**Verdict** (:func:`verdict`): the reference is ``sd`` when measured and faster than the
base, else the base (1.0). ``tune`` is worth running when a kind of setting it searches
beats the reference (:data:`TUNED_KINDS`). Judge-based settings are read at full acceptance
(every step accepted, on either base server), not at the probe's measured acceptance: tune's
thresholds move the acceptance, and every step accepted is the bound of every threshold; the
verdict's text gives the measured-acceptance ceiling beside it. Agreement is read at the
highest ``k``. When no searched kind beats the reference but one is within the noise, the
verdict says so, and that a tune run would only confirm it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...judges.registry import parse_judge

AGREE_K: tuple[int, ...] = (1, 2)
"""The agreeing steps per round the agreement ceilings are computed at."""

NOISE_FLOOR = 0.10
"""The least relative noise band of a verdict (see the module's docstring)."""


def cost_ratio(draft_step_s: float, base_step_s: float) -> float:
    """``c``: the draft's cost per token over the base's."""
    return draft_step_s / base_step_s


def judge_share(judge_s: float, step_tokens: float, base_step_s: float) -> float:
    """``v``: a judge call's seconds over the base's seconds to write the step."""
    return judge_s / (step_tokens * base_step_s)


def judge_speedup(c: float, v: float, r: float = 0.0, sd: float = 1.0) -> float:
    """``sd / (c + v + r)``: judge-based speculation against the plain base."""
    return sd / (c + v + r)


def agreement_speedup(k: int, n: int, c: float, batch: float) -> float:
    """``min(1 + k, n) / (n c + batch)``: one agreement round of ``n`` steps in flight."""
    return min(1 + k, n) / (n * c + batch)


@dataclass(frozen=True)
class Agreement:
    """The agreement ceiling at ``k`` agreeing steps a round, and the ``n`` that gives it."""

    k: int
    n: int
    speedup: float


def agreement_ceiling(
    k: int, draft_step_s: float, batch_step_s: Mapping[int, float], base_step_s: float
) -> Agreement | None:
    """The best :func:`agreement_speedup` over the measured batch sizes ``n >= k + 1``.

    ``batch_step_s``: the verifying server's decode step at each measured concurrency;
    ``base_step_s``: the plain base's single stream (the yardstick). ``None`` when no batch
    of ``k + 1`` or more was measured.
    """
    c = cost_ratio(draft_step_s, base_step_s)
    found = [
        Agreement(k, n, agreement_speedup(k, n, c, step / base_step_s))
        for n, step in sorted(batch_step_s.items())
        if n >= k + 1
    ]
    return max(found, key=lambda a: a.speedup) if found else None


@dataclass(frozen=True)
class Measured:
    """What the arithmetic needs from the measurements."""

    draft_step_s: Mapping[int, float]
    """Concurrency -> the draft's decode step (seconds)."""
    base_step_s: Mapping[int, float]
    sd_step_s: Mapping[int, float] | None = None
    step_tokens: float | None = None
    """Mean tokens of a drafted step."""
    judge_s: float | None = None
    """Mean seconds of a judge call on the plain base server."""
    acceptance: float | None = None
    sd_judge_s: float | None = None
    """Mean seconds of a judge call on the ``sd`` base server."""
    spread: Mapping[str, float | None] | None = None
    """Server (``draft``, ``base``, ``sd``) -> the relative spread of its one-stream decode
    step over the repeats (:attr:`.speeds.Decode.spread`; ``None``: not known)."""


def measured_noise(spread: Mapping[str, float | None] | None) -> float | None:
    """The sum of the known one-stream spreads (``None`` when none is known)."""
    known = [s for s in (spread or {}).values() if s is not None]
    return sum(known) if known else None


def noise_band(measured: float | None, floor: float = NOISE_FLOOR) -> float:
    """The verdict's relative noise: the larger of the measured noise and ``floor``."""
    return max(floor, measured or 0.0)


def beats(value: float, reference: float, noise: float) -> bool:
    """True when ``value`` is above ``reference`` by more than the relative ``noise``."""
    return value > reference * (1.0 + noise)


@dataclass(frozen=True)
class Ceilings:
    """Every ceiling of one probe (``None`` where its inputs were not measured)."""

    c: float
    v: float | None
    r: float | None
    judge_full: float | None
    judge_measured: float | None
    agree: dict[int, Agreement] = field(default_factory=dict)
    sd: float | None = None
    c_sd: float | None = None
    v_sd: float | None = None
    judge_sd_full: float | None = None
    judge_sd_measured: float | None = None
    agree_sd: dict[int, Agreement] = field(default_factory=dict)
    spread: float | None = None
    """The probe's measured noise (:func:`measured_noise`; ``None``: not known)."""
    noise: float = NOISE_FLOOR
    """The verdict's noise band (:func:`noise_band`)."""

    def named(self) -> dict[str, float]:
        """Every measured ceiling by its name in the table and ``summary.json``."""
        out = {
            "judge_full": self.judge_full,
            "judge_measured": self.judge_measured,
            **{f"agree_k{k}": a.speedup for k, a in self.agree.items()},
            "sd": self.sd,
            "judge_sd_full": self.judge_sd_full,
            "judge_sd_measured": self.judge_sd_measured,
            **{f"agree_sd_k{k}": a.speedup for k, a in self.agree_sd.items()},
        }
        return {name: value for name, value in out.items() if value is not None}


def ceilings(m: Measured) -> Ceilings:
    """The ceilings that follow from ``m`` (see the module's docstring)."""
    t_d, t_b = m.draft_step_s[1], m.base_step_s[1]
    c = cost_ratio(t_d, t_b)
    spread = measured_noise(m.spread)
    noise = noise_band(spread)
    v = r = full = at_measured = None
    if m.judge_s is not None and m.step_tokens:
        v = judge_share(m.judge_s, m.step_tokens, t_b)
        full = judge_speedup(c, v)
        if m.acceptance is not None:
            r = 1.0 - m.acceptance
            at_measured = judge_speedup(c, v, r)
    agree = {
        k: a for k in AGREE_K if (a := agreement_ceiling(k, t_d, m.base_step_s, t_b)) is not None
    }
    if not m.sd_step_s or 1 not in m.sd_step_s:
        return Ceilings(c, v, r, full, at_measured, agree, spread=spread, noise=noise)
    t_s = m.sd_step_s[1]
    sd, c_sd = t_b / t_s, cost_ratio(t_d, t_s)
    v_sd = sd_full = sd_measured = None
    if m.sd_judge_s is not None and m.step_tokens:
        v_sd = judge_share(m.sd_judge_s, m.step_tokens, t_s)
        sd_full = judge_speedup(c_sd, v_sd, sd=sd)
        if r is not None:
            sd_measured = judge_speedup(c_sd, v_sd, r, sd=sd)
    agree_sd = {
        k: a for k in AGREE_K if (a := agreement_ceiling(k, t_d, m.sd_step_s, t_b)) is not None
    }
    return Ceilings(
        c,
        v,
        r,
        full,
        at_measured,
        agree,
        sd,
        c_sd,
        v_sd,
        sd_full,
        sd_measured,
        agree_sd,
        spread=spread,
        noise=noise,
    )


TUNED_KINDS: tuple[str, ...] = ("judge_full", "judge_sd_full", "agree_k2", "agree_sd_k2")
"""The ceilings of the kinds of setting ``tune`` searches (each at its most hopeful)."""


@dataclass(frozen=True)
class Verdict:
    """Which ceilings can win, and whether ``tune`` is worth its hours."""

    reference: str
    """``sd`` or ``base``: the speed to beat."""
    reference_speedup: float
    above_reference: tuple[str, ...]
    """The ceilings that beat the reference by more than :attr:`noise`."""
    above_base: tuple[str, ...]
    """The ceilings that beat the base (1.0) by more than :attr:`noise`."""
    tune_worth: bool
    noise: float = NOISE_FLOOR
    """The relative noise band the comparisons used."""
    spread: float | None = None
    """The probe's measured noise, if known (the band is the larger of it and the floor)."""
    within_noise_of_reference: tuple[str, ...] = ()
    """The ceilings above the reference by at most :attr:`noise`: not told from it."""
    within_noise_of_base: tuple[str, ...] = ()
    """The same against the base."""
    tune_kinds: tuple[str, ...] = ()
    """The measured ceilings of :data:`TUNED_KINDS` the ``tune`` rule read (the judge's at
    every step accepted)."""
    named: Mapping[str, float] = field(default_factory=dict)
    """Every measured ceiling (:meth:`Ceilings.named`), for the verdict's text."""
    acceptance: float | None = None
    """The judge's measured acceptance (``None``: no step judged)."""


def verdict(c: Ceilings, noise: float | None = None) -> Verdict:
    """The rule in the module's docstring (``noise``: the band, default ``c.noise``)."""
    band = c.noise if noise is None else noise
    named = c.named()
    ref, ref_speed = ("sd", c.sd) if c.sd is not None and c.sd > 1.0 else ("base", 1.0)
    assert ref_speed is not None
    others = {n: s for n, s in named.items() if n != "sd"}
    above_ref = tuple(n for n, s in others.items() if beats(s, ref_speed, band))
    near_ref = tuple(n for n, s in others.items() if ref_speed < s and n not in above_ref)
    above_base = tuple(n for n, s in others.items() if beats(s, 1.0, band))
    near_base = tuple(n for n, s in others.items() if 1.0 < s and n not in above_base)
    kinds = tuple(kind for kind in TUNED_KINDS if kind in named)
    worth = any(beats(named[kind], ref_speed, band) for kind in kinds)
    return Verdict(
        ref,
        ref_speed,
        above_ref,
        above_base,
        worth,
        noise=band,
        spread=c.spread,
        within_noise_of_reference=near_ref,
        within_noise_of_base=near_base,
        tune_kinds=kinds,
        named=named,
        acceptance=None if c.r is None else 1.0 - c.r,
    )


# --- what `specreason tune --probe FILE` reads --------------------------------------------


def tune_table(c: Ceilings, judge: str) -> dict[str, Any]:
    """The ``tune`` section of ``summary.json``: a candidate's ceiling, by base server.

    ``measured_judge``: the probe's judge at full acceptance; ``any_judge``: ``1 / c``, the
    bound of every judge (``v = r = 0``; the same on an ``sd`` base: ``sd / c' = 1 / c``);
    ``noise``: the verdict's band (absent from older files: :data:`NOISE_FLOOR` then).
    """
    return {
        "reference": verdict(c).reference_speedup,
        "noise": c.noise,
        "judge": judge,
        "plain": {"measured_judge": c.judge_full, "any_judge": 1.0 / c.c},
        "sd": {"measured_judge": c.judge_sd_full, "any_judge": 1.0 / c.c},
    }


def load_tune_table(path: str | Path) -> dict[str, Any]:
    """The ``tune`` section of a probe's ``summary.json`` (ConfigError naming the file)."""
    where = Path(path)
    try:
        table = json.loads(where.read_text(encoding="utf-8"))["tune"]
        float(table["reference"]), table["plain"]["any_judge"], table["sd"]["any_judge"]
    except OSError as exc:
        raise ConfigError(f"--probe {where}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError):
        raise ConfigError(
            f"--probe {where}: not a probe summary (write one with `specreason probe`)"
        ) from None
    return dict(table)


def candidate_ceiling(table: Mapping[str, Any], judge: str, on_sd: bool) -> float:
    """A judge-based setting's ceiling against the base, from a probe's ``tune`` table.

    The probe's measured judge cost applies to a judge that decides with the same last part
    (the cheap checks before it cost nothing here); any other judge gets ``1 / c``.
    """
    side = table["sd" if on_sd else "plain"]
    same = parse_judge(judge)[-1] == parse_judge(table["judge"])[-1]
    if same and side.get("measured_judge") is not None:
        return float(side["measured_judge"])
    return float(side["any_judge"])


def below_reference(table: Mapping[str, Any], judge: str, on_sd: bool) -> bool:
    """True when the setting's ceiling is at most the probe's reference: it cannot win."""
    return candidate_ceiling(table, judge, on_sd) <= float(table["reference"])


def table_noise(table: Mapping[str, Any]) -> float:
    """The noise band of a probe's ``tune`` table (:data:`NOISE_FLOOR` in older files)."""
    return float(table.get("noise", NOISE_FLOOR))


def clearly_above_reference(table: Mapping[str, Any], judge: str, on_sd: bool) -> bool:
    """True when the setting's ceiling beats the reference by more than the probe's noise.

    The verdict's rule for one setting; a skip rule of ``not clearly_above_reference`` would
    skip the settings within the noise too, not only those that cannot win.
    """
    ceiling = candidate_ceiling(table, judge, on_sd)
    return beats(ceiling, float(table["reference"]), table_noise(table))
