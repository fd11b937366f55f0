"""Speed-up ceilings from measured speeds, and the probe's verdict (pure arithmetic).

Every speed-up is against the base model writing the same tokens at the probe's *load*
``n`` (``specreason probe --load``, default 1: one request at a time), and every ceiling
leaves out what the probe does not count (each request's prefill and overhead, the base's
prefill of drafted text), so a real run is at most this fast.

Notation: ``t_d(N)``, ``t_b(N)``, ``t_s(N)``: seconds of one decode step of a batch of ``N``
streams on the draft, the base and the ``sd`` base server (:attr:`.speeds.Decode.step_s`);
``t_x = t_x(n)``, the step at the load. ``L``: tokens of a drafted step; ``J``: seconds of a
judge call.

**The load.** At ``n`` requests at once every server holds ``n`` streams: the base alone
writes each request's tokens at ``t_b(n)``, ``sd`` at ``t_s(n)``, and a speculating mode's
draft writes its steps at ``t_d(n)``. So every formula below reads the steps at ``n``: with
``n = 1`` they are the one-stream speeds of the probes written before the load was named. The
judge's call is measured one at a time; under load it waits behind the batch, so ``J`` is the
least it costs there and the judge's ceilings stay upper bounds. ``sd``'s predicted speed-up
at every measured load, ``t_b(N) / t_s(N)``, is :func:`sd_by_load` (what ``specreason bench
load --probe`` shows beside its measured cells).

**Judge-based speculation** (SpecReason). Per step the draft writes it (``L t_d``), the judge
reads it (``J``), and a share ``r`` of steps is rewritten by the base (``L t_b`` each). The
base alone spends ``L t_b``. Per generated token, relative to the base::

    c = t_d / t_b        v = J / (L t_b)        r = 1 - acceptance
    speed-up = 1 / (c + v + r)          at most 1 / (c + v), every step accepted

On an ``sd`` base server the judge and the rewrites run there: with ``c' = t_d / t_s``,
``v' = J' / (L t_s)`` and ``sd = t_b / t_s``, the speed-up against the plain base is
``sd / (c' + v' + r)``.

**Verification by agreement** (Lookahead-style, ``verify="agree"``,
:mod:`langchain_specreason.graph.verify`). A round of ``N`` steps in flight is pipelined: the
draft writes its steps one after the other (draft step ``p`` is done at ``(p + 1) L t_d``), and
the base's request for position ``p`` is sent as soon as its prefix is known (position 0 at the
round's start, position ``p`` once draft step ``p - 1`` is written), so the base's positions run
concurrently behind the draft. The round ends at the first disagreement, once both the draft's
and the base's step at that position are written; with ``k`` agreeing draft steps in a row it
keeps ``s = min(1 + k, N)`` steps (the agreeing ones and the base's own at the disagreement),
which the base alone writes in ``s L t_b``. With ``k`` agreeing and then a disagreement, the
round costs about ``k L t_d + L t_b``; ``L`` cancels::

    speed-up(k) = (k + 1) / (k c + max(c, b)),     b = the last position's time / (L t_b)

``b`` is 1 when the base server has idle parallel capacity (its positions cost no more together
than one alone); when they share the server each runs at the batch's step time ``t_b(m)``,
``m`` the base requests running at that moment. :func:`round_time` computes the round exactly
for that schedule: each running request writes a token every ``t_b(m)``, and the requests of
positions after the disagreement (sent while the base was still busy) take their share until
the round ends. ``t_b(m)`` at an ``m`` not measured is the one measured at the largest
concurrency below it, a lower bound when a batch never writes a stream faster than a smaller
one; so, with prefill and overhead left out, the speed-up is an upper bound of the implemented
schedule. More steps in flight than ``k + 1`` only add requests that share the base server, so
the ceiling at ``k`` is the round of ``N = k + 1``. On an ``sd`` base server ``t_b(m)`` becomes
``t_s(m)``; the speed-up is still against the plain base. At a load of ``n`` requests, each
running such rounds, the base server holds ``n`` times each request's positions: ``m`` running
positions of a round cost ``t_b(n m)`` a step (:func:`loaded`), against the base alone at
``t_b(n)``. (This ceiling used to charge a serial round, ``N`` drafts then one batch, ``min(1 +
k, N) / (N c + b(N))``: below what the pipelined mode can reach, e.g. 1.31x instead of 1.58x at
``k = 1``, ``N = 2``, ``c = 0.27``, ``b = 1``.)

**Token SD** (``sd``): ``t_b / t_s``, measured directly (at the load: ``t_b(n) / t_s(n)``).

**Noise band.** Every speed above is measured, and so is its noise: each decode measurement
runs ``--repeats`` times, the fastest is kept and the slowest is recorded
(:attr:`.speeds.Decode.spread`: slowest step over fastest, minus 1). A ceiling and its
reference are ratios of these speeds, whose relative errors add (to first order), so the
probe's *measured* noise is the sum of the spreads at the load of the servers measured (draft,
base, ``sd``; one stream's at the default load). The band is the larger of that and
:data:`NOISE_FLOOR` (10%). The floor stays whatever the repeats say, because: the default two
repeats (one with ``--quick``) do not estimate a spread; the judge's time is measured once, not
repeated; the same bound on the ``cpu`` pair read 1.95x in one probe and 2.02x in another
(3.5%, between runs, larger than the spread within a run); and a ceiling leaves out prefill and
overhead, so a real run falls below it and a ceiling needs a clear edge to mean a win. The
spreads at other concurrencies are recorded in ``summary.json`` but not added: the band is one
number for the whole probe.

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
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
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


def batch_cost(batch: Mapping[int, float], m: int) -> float:
    """``b(m)``: the step measured at the largest concurrency at most ``m`` (see the module)."""
    return batch[max(n for n in batch if n <= m)]


def round_time(k: int, n: int, c: float, batch: Mapping[int, float]) -> float:
    """A pipelined agreement round, in units of ``L t_b`` (the base writing one step alone).

    ``n`` steps in flight, ``k`` agreeing draft steps before the first disagreement; ``c``: the
    draft's cost per token over the base's; ``batch``: concurrency -> the verifying server's
    decode step over ``t_b`` (it must hold 1). Base position ``p`` is sent at ``p c`` for
    ``p < n``; each running request writes a token every ``b(m)`` (``m`` running at once); the
    round ends when the base's step at its last kept position ``s - 1`` is written, and the
    draft's (``s c``).
    """
    keep = min(1 + k, n)
    starts = [p * c for p in range(n)]
    left = [1.0] * n
    done: list[float | None] = [None] * n
    now = 0.0
    eps = 1e-12
    while done[keep - 1] is None:
        running = [p for p in range(n) if starts[p] <= now + eps and done[p] is None]
        upcoming = [t for t in starts if t > now + eps]
        if not running:  # every sent request is written; the next waits for its draft step
            now = min(upcoming)
            continue
        rate = 1.0 / batch_cost(batch, len(running))
        until = min([now + min(left[p] for p in running) / rate, *upcoming])
        for p in running:
            left[p] -= (until - now) * rate
            if left[p] <= eps:
                done[p] = until
        now = until
    last = done[keep - 1]
    assert last is not None
    return max(last, keep * c)


def loaded(step_s: Mapping[int, float], n: int, upto: int) -> dict[int, float]:
    """``m -> t(n m)`` for ``m`` in ``1..upto``: a request's ``m`` running at load ``n``.

    Each of ``n`` requests running ``m`` at once puts ``n m`` on the server; a concurrency not
    measured reads the largest measured below it (:func:`batch_cost`). ``step_s`` must hold
    ``n`` or less. With ``n = 1`` it is ``step_s`` read at ``1..upto``.
    """
    return {m: batch_cost(step_s, n * m) for m in range(1, upto + 1)}


def sd_by_load(
    base_step_s: Mapping[int, float], sd_step_s: Mapping[int, float]
) -> dict[int, float]:
    """``N -> t_b(N) / t_s(N)``: ``sd``'s predicted speed-up over the base at each load.

    Only the concurrencies both servers were measured at; empty without ``sd``.
    """
    return {n: base_step_s[n] / sd_step_s[n] for n in sorted(set(base_step_s) & set(sd_step_s))}


def agreement_speedup(k: int, n: int, c: float, batch: Mapping[int, float]) -> float:
    """The steps a pipelined round keeps over its :func:`round_time` (against the base)."""
    return min(1 + k, n) / round_time(k, n, c, batch)


@dataclass(frozen=True)
class Agreement:
    """The agreement ceiling at ``k`` agreeing steps a round, and the ``n`` that gives it."""

    k: int
    n: int
    speedup: float


def agreement_ceiling(
    k: int,
    draft_step_s: float,
    batch_step_s: Mapping[int, float],
    base_step_s: float,
    load: int = 1,
) -> Agreement | None:
    """:func:`agreement_speedup` at ``k`` with ``k + 1`` steps in flight (see the module).

    ``batch_step_s``: the verifying server's decode step at each measured concurrency;
    ``draft_step_s`` and ``base_step_s``: the draft's and the plain base's step at ``load``
    (the yardstick). ``None`` when the verifying server was not measured at ``load``.
    """
    if load not in batch_step_s:
        return None
    c = cost_ratio(draft_step_s, base_step_s)
    batch = {m: step / base_step_s for m, step in loaded(batch_step_s, load, k + 1).items()}
    return Agreement(k, k + 1, agreement_speedup(k, k + 1, c, batch))


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
    """Server (``draft``, ``base``, ``sd``) -> the relative spread of its decode step at
    :attr:`load` over the repeats (:attr:`.speeds.Decode.spread`; ``None``: not known)."""
    load: int = 1
    """Requests at once the ceilings are read at (every step is the one at this load)."""


def measured_noise(spread: Mapping[str, float | None] | None) -> float | None:
    """The sum of the known spreads at the load (``None`` when none is known)."""
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
    load: int = 1
    """Requests at once every speed was read at (:attr:`Measured.load`)."""
    sd_by_load: dict[int, float] = field(default_factory=dict)
    """``sd``'s predicted speed-up over the base at each measured load (:func:`sd_by_load`)."""

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
    """The ceilings that follow from ``m`` at its load (see the module's docstring).

    ConfigError when the draft or the base was not measured at the load.
    """
    n = m.load
    for role, steps in (("draft", m.draft_step_s), ("base", m.base_step_s)):
        if n not in steps:
            raise ConfigError(
                f"load {n}: the {role} server's decode was not measured at {n} streams "
                f"(measured: {', '.join(map(str, sorted(steps)))})"
            )
    t_d, t_b = m.draft_step_s[n], m.base_step_s[n]
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
        k: a for k in AGREE_K if (a := agreement_ceiling(k, t_d, m.base_step_s, t_b, n)) is not None
    }
    by_load = sd_by_load(m.base_step_s, m.sd_step_s or {})
    if not m.sd_step_s or n not in m.sd_step_s:
        return Ceilings(
            c, v, r, full, at_measured, agree, spread=spread, noise=noise, load=n,
            sd_by_load=by_load,
        )  # fmt: skip
    t_s = m.sd_step_s[n]
    sd, c_sd = t_b / t_s, cost_ratio(t_d, t_s)
    v_sd = sd_full = sd_measured = None
    if m.sd_judge_s is not None and m.step_tokens:
        v_sd = judge_share(m.sd_judge_s, m.step_tokens, t_s)
        sd_full = judge_speedup(c_sd, v_sd, sd=sd)
        if r is not None:
            sd_measured = judge_speedup(c_sd, v_sd, r, sd=sd)
    agree_sd = {
        k: a for k in AGREE_K if (a := agreement_ceiling(k, t_d, m.sd_step_s, t_b, n)) is not None
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
        load=n,
        sd_by_load=by_load,
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
    load: int = 1
    """Requests at once every speed was read at (the text names it)."""


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
        load=c.load,
    )


# --- what `specreason tune --probe FILE` reads --------------------------------------------


def tune_table(c: Ceilings, judge: str) -> dict[str, Any]:
    """The ``tune`` section of ``summary.json``: a candidate's ceiling, by base server.

    ``measured_judge``: the probe's judge at full acceptance; ``any_judge``: ``1 / c``, the
    bound of every judge (``v = r = 0``; the same on an ``sd`` base: ``sd / c' = 1 / c``);
    ``noise``: the verdict's band (absent from older files: :data:`NOISE_FLOOR` then);
    ``load``: the requests at once every ceiling was read at (absent from older files: 1).
    """
    return {
        "reference": verdict(c).reference_speedup,
        "noise": c.noise,
        "load": c.load,
        "judge": judge,
        "plain": {"measured_judge": c.judge_full, "any_judge": 1.0 / c.c},
        "sd": {"measured_judge": c.judge_sd_full, "any_judge": 1.0 / c.c},
    }


@contextmanager
def reading_probe(path: str | Path) -> Iterator[Path]:
    """Read a probe's ``summary.json`` inside the block; its errors become one ConfigError.

    A file that cannot be read, or does not hold what the block reads, is one ConfigError
    naming ``--probe path``. A ConfigError raised in the block (e.g. a load the probe did not
    measure) passes as it is.
    """
    where = Path(path)
    try:
        yield where
    except ConfigError:
        raise
    except OSError as exc:
        raise ConfigError(f"--probe {where}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError):
        raise ConfigError(
            f"--probe {where}: not a probe summary (write one with `specreason probe`)"
        ) from None


def load_tune_table(path: str | Path) -> dict[str, Any]:
    """The ``tune`` section of a probe's ``summary.json`` (ConfigError naming the file)."""
    with reading_probe(path) as where:
        table = json.loads(where.read_text(encoding="utf-8"))["tune"]
        float(table["reference"]), table["plain"]["any_judge"], table["sd"]["any_judge"]
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
