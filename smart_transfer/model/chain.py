"""Chain rules: exactly one Seed first, contiguous sequence numbers, matching prev hashes, contiguous
offsets, and every block stored under the hash of its own bytes."""

from __future__ import annotations

from collections.abc import Iterable

from msgspec import Struct

from smart_transfer.model.block import MetadataBlock
from smart_transfer.model.errors import ChainRuleViolation
from smart_transfer.model.events import AddData, Seed
from smart_transfer.model.multihash import Multihash


class ChainTip(Struct, frozen=True):
    """What the rules need to know about the newest block of a valid chain to extend it."""

    head: Multihash
    sequence_number: int
    dataset_id: str
    next_offset: int


def _broken(rule: str, message: str, seq: int, address: Multihash) -> ChainRuleViolation:
    return ChainRuleViolation(rule, message, sequence_number=seq, block_hash=str(address))


def _first(address: Multihash, block: MetadataBlock) -> ChainTip:
    """The tip of a new chain whose first block is ``block``, checked."""
    seq = block.sequence_number
    if not isinstance(block.event, Seed):
        raise _broken("seed-first", f"the first block must be a Seed, not {type(block.event).__name__}", seq, address)
    if seq != 0:
        raise _broken("sequence", f"the first block must have sequence number 0, not {seq}", seq, address)
    if block.prev_block_hash is not None:
        raise _broken("prev-hash", "the first block must not have a previous block", seq, address)
    return ChainTip(address, 0, block.event.dataset_id, 0)


def validate_extension(tip: ChainTip | None, blocks: Iterable[tuple[Multihash, MetadataBlock]]) -> ChainTip | None:
    """Check ``blocks`` (oldest first, each with the address it is stored under) as an extension of a
    valid chain ending at ``tip`` (``None``: a new chain). Returns the new tip, or raises
    ChainRuleViolation naming the first block that breaks a rule. (The running tip is kept in locals:
    this runs over every block of a 100,000-block pull.)"""
    iterator = iter(blocks)
    if tip is None:
        first = next(iterator, None)
        if first is None:
            return None
        address, block = first
        if not address.matches(block.encode()):
            raise _broken("content-address", _NOT_ITS_ADDRESS, block.sequence_number, address)
        tip = _first(address, block)
    head, last_seq, next_offset = tip.head, tip.sequence_number, tip.next_offset
    for address, block in iterator:
        seq = block.sequence_number
        if not address.matches(block.encode()):
            raise _broken("content-address", _NOT_ITS_ADDRESS, seq, address)
        event = block.event
        if isinstance(event, Seed):
            raise _broken("single-seed", "only the first block may be a Seed", seq, address)
        if seq != last_seq + 1:
            raise _broken("sequence", f"expected sequence number {last_seq + 1}, got {seq}", seq, address)
        if block.prev_block_hash != head:
            raise _broken("prev-hash", f"previous block hash is {block.prev_block_hash}, expected {head}", seq, address)
        if isinstance(event, AddData) and event.new_data is not None:
            interval = event.new_data.offset_interval
            if interval.start != next_offset:
                raise _broken(
                    "offsets", f"data starts at offset {interval.start}, expected {next_offset}", seq, address
                )
            next_offset = interval.end + 1
        head, last_seq = address, seq
    return ChainTip(head, last_seq, tip.dataset_id, next_offset)


_NOT_ITS_ADDRESS = "the block's bytes do not hash to the address it is stored under"


def validate_chain(blocks: Iterable[tuple[Multihash, MetadataBlock]]) -> ChainTip | None:
    """Check a whole chain, oldest block first; returns its tip (``None`` for an empty chain)."""
    return validate_extension(None, blocks)
