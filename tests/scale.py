"""Large datasets and checkpoints made fast, for the tests and the bench that measure how costs grow with a dataset:
objects written straight into a workspace's store and one block each, as ``smart-transfer add``
would make them, without a process per file."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from smart_transfer.checkpoint.files import StoredCheckpoint, store_checkpoint
from smart_transfer.model import AddData, DataSlice, Multihash, ObjectKind, ObjectRef, OffsetInterval
from smart_transfer.model.events import Checkpoint
from smart_transfer.repo import Workspace


def grow(workspace: Path, name: str, count: int, size: int = 64) -> None:
    """Append ``count`` blocks to dataset ``name`` of ``workspace`` (created if new), each adding a
    new data object of ``size`` random bytes and one record."""
    with Workspace(workspace) as opened:
        dataset = opened.dataset(name)
        tip = dataset.tip()
        offset = tip.next_offset if tip is not None else 0
        events = []
        for _ in range(count):
            data = os.urandom(size)
            digest = Multihash.of(data)
            opened.store.put(dataset.object_key(ObjectRef(ObjectKind.DATA, digest, size)), data)
            events.append(AddData(new_data=DataSlice(digest, size, OffsetInterval(offset, offset), 1)))
            offset += 1
        dataset.append(events)


#: The files of a RocksDB checkpoint besides its SST files.
RUNTIME_FILES = ("CURRENT", "IDENTITY", "MANIFEST-000005", "OPTIONS-000007")


def sst_names(count: int, first: int = 0) -> list[str]:
    """RocksDB-style SST file names, numbered from ``first``."""
    return [f"{first + i:06d}.sst" for i in range(count)]


def write_checkpoint(directory: Path, names: Iterable[str], tag: str = "") -> Path:
    """A checkpoint directory: each file's content is its name (and ``tag`` for the mutable ones)."""
    directory.mkdir(parents=True)
    for name in names:
        extra = tag if not name.endswith(".sst") else ""
        (directory / name).write_bytes(f"{name}{extra}".encode())
    return directory


def commit_checkpoint(workspace: Workspace, name: str, directory: Path) -> StoredCheckpoint:
    """Store the checkpoint's files and pages and append a block naming it (what ingest commits)."""
    dataset = workspace.dataset(name)
    stored = store_checkpoint(dataset, directory)
    root = stored.manifest
    dataset.append([AddData(new_checkpoint=Checkpoint(root.hash(), len(root.encode())))])
    return stored


def ten_rows_changed(names: list[str]) -> list[str]:
    """A 10-row change: 10 buckets all over the key space rewritten as new SST files (new numbers),
    RocksDB's MANIFEST replaced."""
    ssts = [n for n in names if n.endswith(".sst")]
    dropped = set(ssts[:: len(ssts) // 10][:10]) | {"MANIFEST-000005"}
    return sorted({*names} - dropped | {*sst_names(10, 900_000), "MANIFEST-000009"})
