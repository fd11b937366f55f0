"""The modes ``bench load --modes`` compares, and its plan: server blocks of (mode, load) cells.

=============  ======================================================  ===================
load mode      who answers                                             base server
=============  ======================================================  ===================
``base``       the base model alone (the bench's prompt and budget)     plain
``sd``         the base model alone, vLLM's speculative decoding        variant ``sd``
``sd-dyn``     as ``sd``, speculation shrinking as the batch grows      variant ``sd-dyn``
``specreason`` the judge mode: the draft writes steps, a judge reads    plain
``agree``      the draft writes ahead, the base writes each position    plain
=============  ======================================================  ===================

Each runs as the bench's :class:`~..shared.modes.Run` of the same name (``sd-dyn`` is the run
``sd`` on the variant ``sd-dyn``). A *cell* is one mode at one load (requests in flight); one
server block per base-server variant (the plain and the speculative base servers do not fit
together in memory), the plain block first; inside a block the cells go load by load, every
mode of the block at one load before the next load, so the host's drift falls on the modes of
one load alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...config import config_default
from ...judges.registry import threshold_field
from ..shared.modes import Run, expand_runs, parse_choices

LOAD_MODES: dict[str, tuple[str, str | None]] = {
    "base": ("base", None),
    "sd": ("sd", "sd"),
    "sd-dyn": ("sd", "sd-dyn"),
    "specreason": ("specreason", None),
    "agree": ("agree", None),
}
"""Load mode: (the bench's mode, the base server's profile variant; ``None``: plain)."""
REFERENCE = "base"
"""The mode every other is compared with at the same load."""
DEFAULT_LOADS = "1,2,4,8"


@dataclass(frozen=True, order=True)
class Cell:
    """One mode at one load: ``concurrency`` requests in flight at most."""

    mode: str
    concurrency: int

    @property
    def label(self) -> str:
        """``specreason @ 4``."""
        return f"{self.mode} @ {self.concurrency}"

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> Cell:
        """The cell a result (or cell) line belongs to."""
        return cls(str(record["mode"]), int(record["concurrency"]))


def parse_load_modes(text: str) -> list[str]:
    """Load modes of a comma list, in order, duplicates removed; ConfigError naming the known."""
    return parse_choices(text, LOAD_MODES, noun="mode")


def mode_run(mode: str, judge: str, threshold: float | None = None) -> Run:
    """The bench run of a load mode (``judge`` and ``threshold``: the judge mode's).

    ``threshold`` is on the judge's own scale (its config field); ``None``: the library's
    default for that field. ``agree`` runs the library's rule and steps ahead.
    """
    kind, variant = LOAD_MODES[mode]
    field = threshold_field(judge)
    by_field = {field: [threshold]} if threshold is not None and field else None
    runs = expand_runs(
        [kind],
        [
            threshold
            if threshold is not None and field == "threshold"
            else config_default("threshold")
        ],
        [config_default("score_method")],
        sd_variant=variant or "sd",
        judges=[judge],
        field_thresholds=by_field,
        agree_rules=[config_default("agree_rule")],
        steps_ahead=[config_default("steps_ahead")],
    )
    return runs[0]


def variant_of(mode: str) -> str | None:
    """The base-server variant a load mode needs (``None``: the plain base server)."""
    return LOAD_MODES[mode][1]


def plan_blocks(modes: Sequence[str], loads: Sequence[int]) -> list[tuple[str | None, list[Cell]]]:
    """The server blocks of a plan and each block's cells, in running order.

    The plain block first, then the variants in the order their modes are named; inside a
    block load by load, the block's modes in the given order at each.
    """
    variants: list[str | None] = []
    for mode in modes:
        if variant_of(mode) not in variants:
            variants.append(variant_of(mode))
    variants.sort(key=lambda v: v is not None)  # stable: the named order of the variants
    return [
        (
            variant,
            [Cell(m, c) for c in loads for m in modes if variant_of(m) == variant],
        )
        for variant in variants
    ]


def all_cells(blocks: Iterable[tuple[str | None, list[Cell]]]) -> list[Cell]:
    """Every cell of the blocks, in running order."""
    return [cell for _, cells in blocks for cell in cells]
