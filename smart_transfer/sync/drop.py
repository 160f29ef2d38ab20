"""What a drop of local object files may delete (``smart-transfer drop``, and a bounded ``pull --follow``
after each update): the objects of a chain that the narrower selection leaves out (the one rule,
``sync/selection.py``), except those a later push needs and the server may lack, the objects of blocks
after the remote head the workspace last synced. Pure: the workspace's I/O is ``client/flows/drop.py``'s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from smart_transfer.model import Multihash, NewBlock, ObjectKind, ObjectRef
from smart_transfer.model.manifest import CheckpointManifest
from smart_transfer.model.selection import EVERYTHING, Selection
from smart_transfer.sync.selection import split_objects


def droppable(
    blocks: Sequence[NewBlock],
    manifests: Mapping[Multihash, CheckpointManifest],
    latest: Multihash | None,
    selection: Selection,
    next_offset: int,
    pushed_through: int,
) -> list[ObjectRef]:
    """The objects of the chain ``blocks`` (oldest first, from block 0) that ``selection`` leaves out and
    that no block after ``pushed_through`` (the sequence number of the remote head as last synced)
    references: those the server holds. ``manifests``: the checkpoints whose files may be dropped (a
    checkpoint whose manifest is not given keeps its files); ``latest``: the checkpoint a reader restores
    (its files are always kept)."""
    left_out = split_objects(blocks, manifests, latest, selection, next_offset).left_out
    unpushed = [item for item in blocks if item.block.sequence_number > pushed_through]
    needed = split_objects(unpushed, manifests, latest, EVERYTHING).wanted
    kept: set[tuple[ObjectKind, Multihash]] = {(ref.kind, ref.physical_hash) for ref in needed}
    return [ref for ref in left_out if (ref.kind, ref.physical_hash) not in kept]
