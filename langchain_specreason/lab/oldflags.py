"""Old spellings of the lab's flags, kept working as hidden, deprecated aliases.

A knob has one name, its :class:`~..config.SpecReasonConfig` field's, from the config through
the flags, records and reports (``--likelihood-threshold``, ``--judge``, ...). A flag that was
once spelled otherwise (``--logprob-threshold``, ``--measures``) still parses, into the same
place, is left out of ``--help``, and says on stderr which name to use.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any


class _OldSpelling(argparse.Action):
    """Store like the new flag, after a one-line deprecation note on stderr."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new: str, **kwargs: Any):
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(f"specreason: {option_string} is deprecated; use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_old_spelling(
    parser: Any, old: str, new: str, *, dest: str, default: Any = argparse.SUPPRESS
) -> None:
    """Let ``old`` set ``dest`` as ``new`` does, hidden from ``--help``, with a note.

    ``default`` stays ``SUPPRESS`` where ``dest`` is the new flag's own (its default holds).
    """
    parser.add_argument(
        old, dest=dest, action=_OldSpelling, new=new, default=default, help=argparse.SUPPRESS
    )
