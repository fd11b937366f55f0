"""The flags several lab commands share beyond the servers' and the datasets', declared once.

The servers' flags are :func:`~.servers.add_server_flags`, the problem sets'
:func:`~.datasets.add_dataset_flags`; here: the result folder and the progress bar every
command ends with, the seeded dev sample of ``tune`` and ``label``, and the one-judge flag.
"""

from __future__ import annotations

from typing import Any

from ...config import DEFAULT_JUDGE
from ...judges.registry import judge_specs

NO_PROGRESS_HELP = "no progress bar"


def add_command(subparsers: Any, name: str, summary: str, doc: str) -> Any:
    """Add the ``name`` subcommand: ``summary`` in the list, ``doc``'s first paragraph atop."""
    return subparsers.add_parser(name, help=summary, description=doc.split("\n\n")[0])


def add_output_flags(
    group: Any,
    out_help: str,
    *,
    required: bool = False,
    default: str | None = None,
    progress_help: str | None = None,
) -> None:
    """``--out`` (the result folder, ``out_help``) and ``--no-progress``."""
    group.add_argument("--out", required=required, default=default, help=out_help)
    add_progress_flag(group, progress_help)


def add_progress_flag(group: Any, progress_help: str | None = NO_PROGRESS_HELP) -> None:
    """``--no-progress``: no progress bar on stderr."""
    group.add_argument("--no-progress", action="store_true", help=progress_help)


def add_sample_flags(group: Any, dataset_help: str) -> None:
    """``--dataset`` (dev problems, ``gsm8k-train`` unless told) and ``--seed`` of its shuffle."""
    group.add_argument("--dataset", default="gsm8k-train", help=dataset_help)
    group.add_argument("--seed", type=int, default=0, help="seed of the problem shuffle")


def add_judge_flag(group: Any, lead: str, default: str = DEFAULT_JUDGE) -> None:
    """``--judge``, one judge or a cascade; ``lead`` says what for, with the judge names."""
    group.add_argument(
        "--judge",
        default=default,
        help=f"{lead.format(judges=', '.join(judge_specs()))}; a+b cascades (default: {default})",
    )
