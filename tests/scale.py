"""Large datasets made fast, for the tests and the bench that measure how costs grow with a dataset:
objects written straight into a workspace's store and one block each, as ``smart-transfer add``
would make them, without a process per file."""

from __future__ import annotations

import os
from pathlib import Path

from smart_transfer.model import AddData, DataSlice, Multihash, ObjectKind, ObjectRef, OffsetInterval
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
