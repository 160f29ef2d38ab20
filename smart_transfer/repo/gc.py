"""Orphan clean-up (seed 003): delete blocks that are not on a dataset's chain and objects that no
block of the chain references, once they are older than a grace period: what failed, abandoned or
out-raced pushes and forced rewrites leave behind. Multipart uploads started longer ago than the
grace period and never completed (a push killed mid-object and not run again) are aborted, which
frees their parts.

What a running push may still commit is younger than the grace period (sessions end at the server's
session timeout, which the grace period must not be shorter than), and the objects such young blocks
reference are kept too. The server's index forgets the objects of blocks a rewrite replaced, so it
never claims a collected object is present.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

from smart_transfer.model import DatasetName, InvalidDatasetName, ModelError, Multihash, NewBlock, objects_of
from smart_transfer.model.manifest import decode_manifest
from smart_transfer.model.walk import walk_chain
from smart_transfer.repo.layout import ObjectKind, block_key, head_key, object_prefix
from smart_transfer.storage import ObjectInfo, ObjectNotFound, ObjectStore

#: Default grace period: the default session timeout.
DEFAULT_GRACE_SECONDS = 3600.0


@dataclass
class GcReport:
    datasets: int = 0
    kept: int = 0
    deleted: list[str] = field(default_factory=list)
    deleted_bytes: int = 0
    too_young: int = 0
    #: Multipart uploads aborted, as "key (upload id)".
    aborted_uploads: list[str] = field(default_factory=list)


def _refs_of(store: ObjectStore, dataset: DatasetName, blocks: list[NewBlock]) -> set[str]:
    """Keys of every object ``blocks`` reference, checkpoint files included."""
    manifests = {}
    for ref in (r for r in objects_of(blocks) if r.kind is ObjectKind.CHECKPOINT):
        try:
            data = store.get(f"{dataset}/{ref.kind.value}/{ref.physical_hash}")
            if ref.physical_hash.matches(data):
                manifests[ref.physical_hash] = decode_manifest(data)
        except (ModelError, ObjectNotFound):
            continue
    return {f"{dataset}/{r.kind.value}/{r.physical_hash}" for r in objects_of(blocks, manifests)}


def _chain(store: ObjectStore, dataset: DatasetName) -> list[NewBlock]:
    """The blocks reachable from the dataset's head (walked in the store, one read each)."""
    raw = store.read_ref(head_key(dataset))
    head = Multihash.parse(raw.decode().strip()) if raw else None
    return walk_chain(head, lambda h: store.get(block_key(dataset, h)), lambda _h: False).blocks


def _delete(store: ObjectStore, info: ObjectInfo, report: GcReport, dry_run: bool) -> None:
    report.deleted.append(info.key)
    report.deleted_bytes += info.size
    if not dry_run:
        store.delete(info.key)


def _abort_stale_uploads(
    store: ObjectStore, dataset: DatasetName, cutoff: float, report: GcReport, dry_run: bool
) -> None:
    for upload in list(store.list_multipart(f"{dataset}/")):
        if upload.initiated > cutoff:
            report.too_young += 1
            continue
        report.aborted_uploads.append(f"{upload.key} ({upload.upload_id})")
        if not dry_run:
            store.abort_multipart(upload.key, upload.upload_id)


def collect_garbage(
    store: ObjectStore, grace_seconds: float = DEFAULT_GRACE_SECONDS, dry_run: bool = False
) -> GcReport:
    """Delete (or, with ``dry_run``, only list) blocks off every chain and unreferenced objects older
    than ``grace_seconds``, and abort multipart uploads started before then."""
    report = GcReport()
    cutoff = time.time() - grace_seconds
    for child in list(store.list_children("")):
        try:
            dataset = DatasetName(child)
        except InvalidDatasetName:
            continue
        report.datasets += 1
        chain = _chain(store, dataset)
        on_chain = {block_key(dataset, b.hash) for b in chain}
        young: list[NewBlock] = []
        for info in list(store.list(f"{dataset}/blocks/")):
            if info.key in on_chain:
                report.kept += 1
            elif info.modified > cutoff:
                report.too_young += 1
                with contextlib.suppress(ModelError, ObjectNotFound):
                    young.append(NewBlock.decode(store.get(info.key)))  # a push in flight may commit it
            else:
                _delete(store, info, report, dry_run)
        referenced = _refs_of(store, dataset, chain + young)
        for kind in ObjectKind:
            for info in list(store.list(object_prefix(dataset, kind))):
                if info.key in referenced:
                    report.kept += 1
                elif info.modified > cutoff:
                    report.too_young += 1
                else:
                    _delete(store, info, report, dry_run)
        _abort_stale_uploads(store, dataset, cutoff, report, dry_run)
    return report


__all__ = ["DEFAULT_GRACE_SECONDS", "GcReport", "collect_garbage"]
