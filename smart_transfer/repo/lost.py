"""Which datasets of a workspace are known to have lost objects, so a pull repairs them.

Every object of a committed local chain was verified before it was renamed into place, so a pull need
not look for holes in what it already has: that look is a stat per object the dataset ever had (100,000
objects: about a second per pull). A hole appears only by damage from outside (a file deleted or changed
by hand, a disk error); what finds one (``verify``, which also moves corrupt objects to quarantine, or a
read that meets a missing slice) marks the dataset here, and the next pull checks the whole kept chain,
fetches what is missing and clears the mark. A mark is a file named after the dataset holding a random
token: a pull clears the mark only when it still holds the token the pull saw before it checked, so damage
found while a pull runs is repaired by the next one."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


class LostObjects:
    """The marks of datasets with lost objects, files in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def mark(self, name: str) -> None:
        """Record that dataset ``name`` lost objects (a new token: a pull running now does not clear it)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        token = secrets.token_hex(8)
        temporary = self.directory / f".{name}.{token}"
        temporary.write_text(token)
        os.replace(temporary, self.directory / name)

    def mark_quietly(self, name: str) -> None:
        """``mark``, for a reader that reports the damage anyway: a workspace it may not write stays unmarked
        (``verify`` marks it when run by its owner)."""
        with contextlib.suppress(OSError):
            self.mark(name)

    def seen(self, name: str) -> str | None:
        """The token of the mark of ``name``, or None when no loss is known."""
        try:
            return (self.directory / name).read_text()
        except FileNotFoundError:
            return None

    def clear(self, name: str, token: str) -> None:
        """Remove the mark of ``name`` if it still holds ``token`` (the repair that saw it succeeded)."""
        if self.seen(name) == token:
            with contextlib.suppress(FileNotFoundError):
                (self.directory / name).unlink()
