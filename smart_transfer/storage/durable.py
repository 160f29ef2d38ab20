"""Durable writes of small local files: a file replaced by a rename survives a power cut whole, and the
rename with it (the file's data synced before the rename, its directory's entry after). One place for
every writer that must not lose a replacement it acted on: the workspace's selection records (a drop
deletes files only once the narrower record is durable) and every output path (``reading/output.py``)."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def replace_durably(target: Path, content: bytes) -> None:
    """Replace ``target`` with ``content``: written to a new file beside it and synced, renamed over it,
    then the directory synced. A crash leaves the old file or the new one, whole."""
    staged = target.with_name(f".{target.name}.{secrets.token_hex(4)}")
    try:
        with staged.open("wb") as sink:
            sink.write(content)
            sink.flush()
            os.fsync(sink.fileno())
        os.replace(staged, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            staged.unlink()
    sync_directory(target.parent)


def sync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (best effort: some file systems refuse to sync one)."""
    with contextlib.suppress(OSError):
        descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
