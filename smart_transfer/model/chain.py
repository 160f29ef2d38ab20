"""Chain rules: exactly one Seed first, contiguous sequence numbers, matching prev hashes, contiguous
offsets, and every block stored under the hash of its own bytes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from smart_transfer.model.block import MetadataBlock
from smart_transfer.model.errors import ChainRuleViolation
from smart_transfer.model.events import AddData, Seed
from smart_transfer.model.multihash import Multihash


@dataclass(frozen=True, slots=True)
class ChainTip:
    """What the rules need to know about the newest block of a valid chain to extend it."""

    head: Multihash
    sequence_number: int
    dataset_id: str
    next_offset: int


def validate_extension(tip: ChainTip | None, blocks: Iterable[tuple[Multihash, MetadataBlock]]) -> ChainTip | None:
    """Check ``blocks`` (oldest first, each with the address it is stored under) as an extension of a
    valid chain ending at ``tip`` (``None``: a new chain). Returns the new tip, or raises
    ChainRuleViolation naming the first block that breaks a rule."""
    for address, block in blocks:
        seq = block.sequence_number

        def broken(rule: str, message: str, _seq: int = seq, _address: Multihash = address) -> ChainRuleViolation:
            return ChainRuleViolation(rule, message, sequence_number=_seq, block_hash=str(_address))

        if block.hash(address.code) != address:
            raise broken("content-address", "the block's bytes do not hash to the address it is stored under")
        if tip is None:
            if not isinstance(block.event, Seed):
                raise broken("seed-first", f"the first block must be a Seed, not {type(block.event).__name__}")
            if seq != 0:
                raise broken("sequence", f"the first block must have sequence number 0, not {seq}")
            if block.prev_block_hash is not None:
                raise broken("prev-hash", "the first block must not have a previous block")
            tip = ChainTip(address, 0, block.event.dataset_id, 0)
            continue
        if isinstance(block.event, Seed):
            raise broken("single-seed", "only the first block may be a Seed")
        if seq != tip.sequence_number + 1:
            raise broken("sequence", f"expected sequence number {tip.sequence_number + 1}, got {seq}")
        if block.prev_block_hash != tip.head:
            raise broken("prev-hash", f"previous block hash is {block.prev_block_hash}, expected {tip.head}")
        next_offset = tip.next_offset
        if isinstance(block.event, AddData) and block.event.new_data is not None:
            interval = block.event.new_data.offset_interval
            if interval.start != next_offset:
                raise broken("offsets", f"data starts at offset {interval.start}, expected {next_offset}")
            next_offset = interval.end + 1
        tip = ChainTip(address, seq, tip.dataset_id, next_offset)
    return tip


def validate_chain(blocks: Iterable[tuple[Multihash, MetadataBlock]]) -> ChainTip | None:
    """Check a whole chain, oldest block first; returns its tip (``None`` for an empty chain)."""
    return validate_extension(None, blocks)
