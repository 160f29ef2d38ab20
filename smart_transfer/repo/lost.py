"""Which datasets of a workspace are known to have lost objects, so a pull repairs them.

Every object of a committed local chain was verified before it was renamed into place, so a pull need
not look for holes in what it already has: that look is a stat per object the dataset ever had (100,000
objects: about a second per pull). A hole appears only by damage from outside (a file deleted or changed
by hand, a disk error); what finds one (``verify``, which also moves corrupt objects to quarantine, a read
that meets a missing slice, an ingest that cannot install its checkpoint) marks the dataset here, and the
next pull checks the whole kept chain, fetches what is missing and clears the marks it saw. Each mark is
a file of its own (``{dataset}/{token}``): a pull removes exactly the marks it saw before it checked, so
damage found while a pull runs is repaired by the next one."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Collection
from pathlib import Path


class LostObjects:
    """The marks of datasets with lost objects, under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def mark(self, name: str) -> None:
        """Record that dataset ``name`` lost objects (a new mark: a pull running now does not clear it)."""
        marks = self.directory / name
        marks.mkdir(parents=True, exist_ok=True)
        (marks / secrets.token_hex(8)).touch()

    def mark_quietly(self, name: str) -> bool:
        """``mark``, for a reader that reports the damage anyway; False when the workspace may not be
        written (the reader then says to run ``verify``, which its owner can)."""
        try:
            self.mark(name)
        except OSError:
            return False
        return True

    def seen(self, name: str) -> frozenset[str]:
        """The marks of ``name`` (empty when no loss is known)."""
        try:
            return frozenset(path.name for path in (self.directory / name).iterdir())
        except (FileNotFoundError, NotADirectoryError):
            return frozenset()

    def clear(self, name: str, marks: Collection[str]) -> None:
        """Remove ``marks`` of ``name`` (the repair that saw them succeeded); newer ones stay."""
        for mark in marks:
            with contextlib.suppress(FileNotFoundError):
                (self.directory / name / mark).unlink()
