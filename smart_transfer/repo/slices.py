"""The data slices of a committed chain, found from the index: by block range, or by offset range with
a binary search over the index's per-block offsets (so the last rows of a long chain cost a handful
of lookups, not a walk of every block)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from smart_transfer.model import AddData, ChainTip, DataSlice, Multihash, ObjectKind, ObjectRef, decode_block
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.errors import HeadMoved

#: Canonical block bytes name this only as the key of an AddData's slice (inside a text value a quote is
#: escaped), so a block whose bytes lack it adds no data slice and need not be decoded.
NEW_DATA = b'"new_data":'


@dataclass(frozen=True, slots=True)
class SliceEntry:
    """A data slice of the chain: the block that added it and what it holds."""

    sequence_number: int
    block_hash: Multihash
    data: DataSlice

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(ObjectKind.DATA, self.data.physical_hash, self.data.size)

    @property
    def first_offset(self) -> int:
        return self.data.offset_interval.start

    @property
    def last_offset(self) -> int:
        return self.data.offset_interval.end


class ChainSlices:
    """The data slices of ``dataset``'s chain up to ``tip`` (a committed tip: the index has an entry
    for every block up to it)."""

    def __init__(self, dataset: DatasetRepository, tip: ChainTip) -> None:
        self.dataset = dataset
        self.tip = tip

    def check_pinned(self) -> None:
        """HeadMoved when the indexed chain no longer holds ``tip`` (a forced pull rewrote it since)."""
        entry = self.dataset.entry_at(self.tip.sequence_number)
        if entry is None or entry[0] != self.tip.head:
            raise HeadMoved(str(self.tip.head), str(entry[0]) if entry is not None else None)

    def in_blocks(self, first: int, last: int) -> Iterator[SliceEntry]:
        """Slices added by blocks ``first..last`` (inclusive), in chain order."""
        self.check_pinned()
        # one scan of the index (hashes and bytes together), not two lookups per block: the last records
        # of a long chain whose slices lie far apart cost one pass over the blocks between
        for seq, (block_hash, body) in enumerate(self.dataset.chain_blocks(first, last), first):
            if NEW_DATA not in body:
                continue  # no slice (canonical bytes name it only as the event's key): not decoded
            event = decode_block(body).event
            if isinstance(event, AddData) and event.new_data is not None:
                yield SliceEntry(seq, block_hash, event.new_data)

    def block_holding(self, offset: int) -> int:
        """The sequence number of the block whose slice holds record ``offset`` (< next_offset):
        the first block after which the chain's next offset exceeds it (binary search)."""
        low, high = 0, self.tip.sequence_number
        while low < high:
            middle = (low + high) // 2
            if self.dataset.required_entry(middle)[1] > offset:
                high = middle
            else:
                low = middle + 1
        return low

    def for_offsets(self, first: int, last: int) -> list[SliceEntry]:
        """Slices holding any record ``first..last`` (inclusive, within the chain's records), in chain order."""
        if first > last:
            return []
        entries = []
        # the block holding ``last`` ends the walk: blocks after it (watermarks, checkpoints, later
        # slices) hold none of the wanted records, so a long tail of them costs nothing
        for entry in self.in_blocks(self.block_holding(first), self.block_holding(last)):
            if entry.first_offset > last:
                break
            entries.append(entry)
        return entries
