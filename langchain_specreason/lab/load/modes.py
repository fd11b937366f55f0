"""The modes ``bench load --modes`` compares, and its plan: server blocks of (mode, load) cells.

=============  ======================================================  ===========  =====
load mode      who answers                                             base server  draft
=============  ======================================================  ===========  =====
``base``       the base model alone (the bench's prompt and budget)     plain        no
``sd``         the base model alone, vLLM's speculative decoding        ``sd``       no
``sd-dyn``     as ``sd``, speculation shrinking as the batch grows      ``sd-dyn``   no
``specreason`` the judge mode: the draft writes steps, a judge reads    plain        yes
``agree``      the draft writes ahead, the base writes each position    plain        yes
=============  ======================================================  ===========  =====

Each runs as the bench's :class:`~..shared.modes.Run` of the same name (``sd-dyn`` is the run
``sd`` on the variant ``sd-dyn``; ``sd``'s own drafter lives inside the base server, so no mode
of the three first needs the draft server). A *cell* is one mode at one load (requests in
flight); one server block per base-server variant (the plain and the speculative base servers
do not fit together in memory), the plain block first; inside a block the cells go load by
load, every mode of the block at one load before the next load, so the host's drift falls on
the modes of one load alike.

A block whose modes need no draft server starts the base alone. ``--cores`` (:data:`CORES`)
says on which cores: ``profile`` (the default) keeps every server on its profile's cores (the
pair's split, as every reading before it was measured: like for like); ``mode`` runs each mode
as it would be deployed: the modes that need no draft in base-only blocks on the whole
machine (so the plain ``base`` gets a block of its own, apart from the plain pair block of
``specreason`` and ``agree``), the others on the pair's split.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...config import config_default
from ...judges.registry import threshold_field
from ...serving.profiles import Role
from ..shared.modes import Run, expand_runs, parse_choices

LOAD_MODES: dict[str, tuple[str, str | None]] = {
    "base": ("base", None),
    "sd": ("sd", "sd"),
    "sd-dyn": ("sd", "sd-dyn"),
    "specreason": ("specreason", None),
    "agree": ("agree", None),
}
"""Load mode: (the bench's mode, the base server's profile variant; ``None``: plain)."""
NEEDS_DRAFT: dict[str, bool] = {
    "base": False,
    "sd": False,
    "sd-dyn": False,
    "specreason": True,
    "agree": True,
}
"""Load mode: whether its runs call the draft server (``sd``'s drafter is in the base server)."""
CORES = ("profile", "mode")
"""``--cores``: every server on its profile's cores (``profile``), or each mode's servers on the
cores it would be deployed with (``mode``: a base that runs alone on the whole machine)."""
DEFAULT_CORES = "profile"
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


def needs_draft(mode: str) -> bool:
    """Whether a load mode's runs call the draft server."""
    return NEEDS_DRAFT[mode]


@dataclass(frozen=True)
class Block:
    """One set of servers and the cells run on it, in order."""

    variant: str | None
    """The base server's profile variant (``None``: plain)."""
    roles: tuple[Role, ...]
    """The servers started: ``("draft", "base")``, or ``("base",)`` when no mode needs the
    draft."""
    cells: tuple[Cell, ...]
    keep_profile_cores: bool = True
    """A base started alone keeps its profile's cores (``--cores profile``); ``False``: it
    takes the draft's too (``--cores mode``, :func:`~...serving.profiles.bind_cores`)."""

    @property
    def draft(self) -> bool:
        """Whether the block starts the draft server."""
        return "draft" in self.roles

    @property
    def label(self) -> str:
        """``plain``, ``plain (base alone)``, ``sd (base alone)``..."""
        return f"{self.variant or 'plain'}{'' if self.draft else ' (base alone)'}"


def plan_blocks(
    modes: Sequence[str], loads: Sequence[int], cores: str = DEFAULT_CORES
) -> list[Block]:
    """The server blocks of a plan and each block's cells, in running order.

    One block per base-server variant with ``cores="profile"`` (the draft started when one of
    its modes needs it); with ``cores="mode"`` the modes that need no draft and those that do
    get blocks of their own. The plain blocks first, then the variants in the order their
    modes are named (blocks of one variant: in the order their modes are named); inside a
    block load by load, the block's modes in the given order at each.
    """
    if cores not in CORES:
        raise ValueError(f"cores: {cores!r} is not one of {CORES}")

    def key(mode: str) -> tuple[str | None, bool | None]:
        return variant_of(mode), needs_draft(mode) if cores == "mode" else None

    keys = list(dict.fromkeys(key(m) for m in modes))
    keys.sort(key=lambda k: k[0] is not None)  # stable: the named order of the rest
    blocks = []
    for k in keys:
        mine = [m for m in modes if key(m) == k]
        draft = any(needs_draft(m) for m in mine)
        blocks.append(
            Block(
                k[0],
                ("draft", "base") if draft else ("base",),
                tuple(Cell(m, c) for c in loads for m in mine),
                keep_profile_cores=cores == "profile",
            )
        )
    return blocks


def all_cells(blocks: Iterable[Block]) -> list[Cell]:
    """Every cell of the blocks, in running order."""
    return [cell for block in blocks for cell in block.cells]
