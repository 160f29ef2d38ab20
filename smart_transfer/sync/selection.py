"""Which objects of a chain a selection wants (``model/selection.py``), and which it leaves out by
choice: one rule, asked by the pull (what to move), verify and status (absent by choice, never lost) and
the push (what it cannot send). The metadata is always wanted: data slices for now, every checkpoint's
manifest and its pages; only checkpoint files are chosen."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from msgspec import Struct

from smart_transfer.model import Multihash, ObjectKind, ObjectRef
from smart_transfer.model.manifest import CheckpointManifest
from smart_transfer.model.selection import Selection


class ObjectSplit(Struct, frozen=True):
    """Every object of a chain, split: those the selection wants, and those it leaves out by choice."""

    wanted: list[ObjectRef]
    left_out: list[ObjectRef]


def split_objects(
    refs: Iterable[ObjectRef],
    manifests: Mapping[Multihash, CheckpointManifest],
    latest: Multihash | None,
    selection: Selection,
) -> ObjectSplit:
    """Split ``refs`` (what blocks reference: slices and checkpoint manifests) and the pages and files of
    each checkpoint whose manifest is in ``manifests``. ``latest``: the manifest hash of the checkpoint a
    reader restores (its files are always wanted). A file shared by a wanted checkpoint is wanted."""
    wanted: dict[tuple[ObjectKind, Multihash], ObjectRef] = {}
    files: dict[Multihash, ObjectRef] = {}
    for ref in refs:
        wanted.setdefault((ref.kind, ref.physical_hash), ref)
    for ref in list(wanted.values()):
        manifest = manifests.get(ref.physical_hash) if ref.kind is ObjectKind.CHECKPOINT else None
        if manifest is None:
            continue
        for page_hash, data in manifest.pages[1:]:  # a paged manifest's pages below its root: metadata
            page = ObjectRef(ObjectKind.CHECKPOINT, page_hash, len(data))
            wanted.setdefault((ObjectKind.CHECKPOINT, page_hash), page)
        chosen = selection.checkpoints == "all" or ref.physical_hash == latest
        for item in manifest.files:
            file_ref = ObjectRef(ObjectKind.CHECKPOINT, item.physical_hash, item.size)
            if chosen:
                wanted.setdefault((ObjectKind.CHECKPOINT, item.physical_hash), file_ref)
            else:
                files.setdefault(item.physical_hash, file_ref)
    left_out = [ref for key, ref in files.items() if (ObjectKind.CHECKPOINT, key) not in wanted]
    return ObjectSplit(list(wanted.values()), left_out)
