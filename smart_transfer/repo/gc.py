"""Orphan clean-up (seed 003): delete data and checkpoint objects that no stored block references and
that are older than a grace period - what failed or abandoned pushes leave behind.

Safe by construction: blocks are never deleted, and an object referenced by *any* stored block (the
current chain, a rewritten one, or a push that lost a race) is kept, so the server's index never
names a deleted object. The grace period must be at least the server's session timeout: an object a
running push uploaded is younger than that, because sessions end at the timeout.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from smart_transfer.checkpoint.manifest import decode_manifest
from smart_transfer.model import DatasetName, InvalidDatasetName, ModelError
from smart_transfer.repo.dataset import NewBlock, objects_of
from smart_transfer.repo.layout import ObjectKind, object_prefix
from smart_transfer.storage import ObjectNotFound, ObjectStore

#: Default grace period: the default session timeout.
DEFAULT_GRACE_SECONDS = 3600.0


@dataclass
class GcReport:
    datasets: int = 0
    kept: int = 0
    deleted: list[str] = field(default_factory=list)
    deleted_bytes: int = 0
    too_young: int = 0


def _referenced(store: ObjectStore, dataset: DatasetName) -> set[str]:
    """Keys of every object any stored block of ``dataset`` references (manifest files included)."""
    blocks = []
    for info in store.list(f"{dataset}/blocks/"):
        try:
            blocks.append(NewBlock.decode(store.get(info.key)))
        except (ModelError, ObjectNotFound):
            continue  # not a block: it references nothing
    manifests = {}
    for ref in (r for r in objects_of(blocks) if r.kind is ObjectKind.CHECKPOINT):
        try:
            data = store.get(f"{dataset}/{ref.kind.value}/{ref.physical_hash}")
            if ref.physical_hash.matches(data):
                manifests[ref.physical_hash] = decode_manifest(data)
        except (ModelError, ObjectNotFound):
            continue
    return {f"{dataset}/{r.kind.value}/{r.physical_hash}" for r in objects_of(blocks, manifests)}


def collect_garbage(
    store: ObjectStore, grace_seconds: float = DEFAULT_GRACE_SECONDS, dry_run: bool = False
) -> GcReport:
    """Delete (or, with ``dry_run``, only list) unreferenced objects older than ``grace_seconds``."""
    report = GcReport()
    cutoff = time.time() - grace_seconds
    for child in list(store.list_children("")):
        try:
            dataset = DatasetName(child)
        except InvalidDatasetName:
            continue
        report.datasets += 1
        referenced = _referenced(store, dataset)
        for kind in ObjectKind:
            for info in list(store.list(object_prefix(dataset, kind))):
                if info.key in referenced:
                    report.kept += 1
                elif info.modified > cutoff:
                    report.too_young += 1
                else:
                    report.deleted.append(info.key)
                    report.deleted_bytes += info.size
                    if not dry_run:
                        store.delete(info.key)
    return report


__all__ = ["DEFAULT_GRACE_SECONDS", "GcReport", "collect_garbage"]
