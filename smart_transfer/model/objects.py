"""What blocks reference: data slices and checkpoints (and, through a checkpoint's manifest, its files).
Pure functions over decoded blocks; every path (pull, push, commit, verify, gc) asks these."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum

import orjson
from msgspec import Struct

from smart_transfer.model.block import MetadataBlock, NewBlock
from smart_transfer.model.events import AddData
from smart_transfer.model.manifest import CheckpointManifest
from smart_transfer.model.multihash import Multihash


class ObjectKind(StrEnum):
    """The kinds of objects blocks reference; the value is the folder name in a repository."""

    DATA = "data"
    CHECKPOINT = "checkpoints"


class ObjectRef(Struct, frozen=True):
    """An object a block references: its kind, content address and size."""

    kind: ObjectKind
    physical_hash: Multihash
    size: int

    @property
    def label(self) -> str:
        """``kind/hash``: how errors and reports name the object."""
        return f"{self.kind.value}/{self.physical_hash}"


def referenced_objects(block: MetadataBlock) -> list[ObjectRef]:
    """The objects ``block`` references (data slice, checkpoint manifest)."""
    event = block.event
    refs: list[ObjectRef] = []
    if isinstance(event, AddData):
        if event.new_data is not None:
            refs.append(ObjectRef(ObjectKind.DATA, event.new_data.physical_hash, event.new_data.size))
        if event.new_checkpoint is not None:
            refs.append(ObjectRef(ObjectKind.CHECKPOINT, event.new_checkpoint.physical_hash, event.new_checkpoint.size))
    return refs


def objects_of(
    blocks: Iterable[NewBlock], manifests: Mapping[Multihash, CheckpointManifest] | None = None
) -> list[ObjectRef]:
    """The distinct objects ``blocks`` reference, in first-reference order; with ``manifests``, the
    files of each checkpoint follow (a manifest not given is skipped: callers check first)."""
    seen: dict[tuple[ObjectKind, Multihash], ObjectRef] = {}
    for item in blocks:
        for ref in referenced_objects(item.block):
            seen.setdefault((ref.kind, ref.physical_hash), ref)
    return with_files(seen.values(), manifests or {})


def checkpoint_refs(blocks: Iterable[NewBlock]) -> list[ObjectRef]:
    """The checkpoint manifests ``blocks`` reference."""
    return [r for r in objects_of(blocks) if r.kind is ObjectKind.CHECKPOINT]


def committed_refs(blocks: Iterable[bytes]) -> list[ObjectRef]:
    """What blocks a repository validated at commit reference, read without re-validating them (a
    light JSON parse): a server plans pulls of 100,000-block chains with this."""
    seen: dict[tuple[ObjectKind, Multihash], ObjectRef] = {}
    for data in blocks:
        # canonical JSON escapes every quote inside text, so a block without these keys' quoted names
        # references nothing: most blocks of a long chain are skipped without a parse
        if b'"new_data"' not in data and b'"new_checkpoint"' not in data:
            continue
        event = orjson.loads(data)["event"]
        if event["type"] != AddData.TYPE:
            continue
        for field_name, kind in (("new_data", ObjectKind.DATA), ("new_checkpoint", ObjectKind.CHECKPOINT)):
            entry = event.get(field_name)
            if entry is not None:
                ref = ObjectRef(kind, Multihash.parse(entry["physical_hash"]), entry["size"])
                seen.setdefault((kind, ref.physical_hash), ref)
    return list(seen.values())


def with_files(refs: Iterable[ObjectRef], manifests: Mapping[Multihash, CheckpointManifest]) -> list[ObjectRef]:
    """``refs`` and, after them, the pages (below the root) and files of each checkpoint among them
    whose manifest is in ``manifests``: every object once."""
    seen = {(r.kind, r.physical_hash): r for r in refs}
    for ref in list(seen.values()):
        manifest = manifests.get(ref.physical_hash) if ref.kind is ObjectKind.CHECKPOINT else None
        if manifest is None:
            continue
        parts = [(h, len(data)) for h, data in manifest.pages[1:]]  # a paged manifest's pages below its root
        parts += [(f.physical_hash, f.size) for f in manifest.files]
        for part_hash, size in parts:
            seen.setdefault((ObjectKind.CHECKPOINT, part_hash), ObjectRef(ObjectKind.CHECKPOINT, part_hash, size))
    return list(seen.values())
