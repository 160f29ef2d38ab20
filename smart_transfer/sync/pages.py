"""Which checkpoint manifest pages the other side of a sync already holds (both protocols, both
directions): those of the last checkpoint at or before the common block, which the receiver stored
with its chain. See ``model/manifest_delta.py`` for the walk."""

from __future__ import annotations

from collections.abc import Mapping

from smart_transfer.model import Multihash, ObjectKind, ObjectRef, committed_refs
from smart_transfer.model.manifest import CheckpointManifest
from smart_transfer.model.manifest_delta import shared_pages
from smart_transfer.repo.dataset import DatasetRepository

#: How many blocks back from the common block a sender looks for the checkpoint the receiver holds;
#: past that it sends every page of the new checkpoints (correct, only larger). Ingest writes a
#: checkpoint with every block that changes state, so the last one is usually the common block.
BASE_LOOKBACK_BLOCKS = 1024
#: Blocks read per step of that look-back (most finds are in the first step).
_STEP = 32


def last_checkpoint(dataset: DatasetRepository, common: Multihash) -> ObjectRef | None:
    """The checkpoint of the last block at or before ``common`` (on the indexed chain) that has one,
    looking back at most BASE_LOOKBACK_BLOCKS blocks."""
    seq = dataset.sequence_of(common)
    if seq is None:
        return None
    lowest = max(0, seq - BASE_LOOKBACK_BLOCKS + 1)
    while seq >= lowest:
        first = max(lowest, seq - _STEP + 1)
        window = list(dataset.chain_entries(first, seq))  # one scan; a block's bytes read only if reached
        for block_hash, cached in reversed(window):
            data = cached if cached is not None else dataset.block_bytes(block_hash)
            refs = [r for r in committed_refs([data]) if r.kind is ObjectKind.CHECKPOINT]
            if refs:
                return refs[0]
        seq = first - 1
    return None


def held_pages(
    dataset: DatasetRepository, common: Multihash | None, manifests: Mapping[Multihash, CheckpointManifest]
) -> set[Multihash]:
    """Pages of ``manifests`` a receiver whose chain reaches ``common`` holds, each standing for its
    subtree (empty when there is no common block or no checkpoint near it)."""
    if common is None or not manifests:
        return set()
    base = last_checkpoint(dataset, common)
    data = dataset.page_source(base.physical_hash) if base is not None else None
    if base is None or data is None or not base.physical_hash.matches(data):
        return set()
    new_pages = {page for m in manifests.values() for page, _ in m.all_pages()}
    return shared_pages((base.physical_hash, data), new_pages, dataset.page_source)
