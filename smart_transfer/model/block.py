"""Metadata blocks: a sequence number, the previous block's hash, a system time and an event."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from msgspec import Struct

from smart_transfer.model.encoding import canonical_bytes, is_canonical, load_object
from smart_transfer.model.errors import InvalidBlock
from smart_transfer.model.events import Event, check_timestamp, event_from_dict
from smart_transfer.model.fastblock import fast_add_data
from smart_transfer.model.fields import get_hash, get_int, get_object, get_str, require_keys
from smart_transfer.model.multihash import SHA2_256, Multihash

#: Blocks are small; anything larger is refused before decoding (bounded memory on hostile input).
MAX_BLOCK_BYTES = 64 * 1024


_BLOCK_KEYS = {"sequence_number", "prev_block_hash", "system_time", "event"}


def utc_now() -> str:
    """The current time as an RFC 3339 UTC timestamp with microseconds."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class MetadataBlock:
    """One link of a dataset's chain."""

    sequence_number: int
    prev_block_hash: Multihash | None
    system_time: str
    event: Event
    _encoded: bytes = field(default=b"", repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sequence_number": self.sequence_number,
            "prev_block_hash": str(self.prev_block_hash) if self.prev_block_hash is not None else None,
            "system_time": self.system_time,
            "event": self.event.to_dict(),
        }

    def encode(self) -> bytes:
        """The canonical bytes of this block (what is stored and hashed)."""
        return self._encoded or canonical_bytes(self.to_dict())

    def hash(self, code: int = SHA2_256) -> Multihash:
        """The block's address: the multihash of its canonical bytes."""
        return Multihash.of(self.encode(), code)


def decode_block(data: bytes) -> MetadataBlock:
    """Decode block bytes; raises InvalidBlock for anything malformed."""
    if len(data) > MAX_BLOCK_BYTES:
        raise InvalidBlock(f"block of {len(data)} bytes exceeds the {MAX_BLOCK_BYTES}-byte limit")
    fast = fast_add_data(data)
    if fast is not None:  # the commonest block, checked in one pass over its bytes (see fastblock.py)
        return MetadataBlock(*fast, _encoded=data)
    return decode_block_fully(data)


def decode_block_fully(data: bytes) -> MetadataBlock:
    """Decode block bytes (at most MAX_BLOCK_BYTES) through the JSON parser and the typed readers:
    the decoder that decides every block the fast path does not take."""
    obj = load_object(data)
    require_keys(obj, "block", _BLOCK_KEYS)
    prev = get_hash(obj, "prev_block_hash", "block") if obj["prev_block_hash"] is not None else None
    block = MetadataBlock(
        get_int(obj, "sequence_number", "block"),
        prev,
        check_timestamp(get_str(obj, "system_time", "block"), "block.system_time"),
        event_from_dict(get_object(obj, "event", "block"), "block.event"),
    )
    # one block, one byte string: refuse non-canonical spellings so a block's address is unique. The
    # typed readers refused every value the model cannot hold, so the model giving back exactly the
    # decoded object, and that object encoding to ``data``, is the canonical check.
    if block.to_dict() != obj or not is_canonical(obj, data):
        raise InvalidBlock("block bytes are not in canonical form (sorted keys, compact JSON)")
    object.__setattr__(block, "_encoded", data)
    return block


def block_sequence(data: bytes) -> int | None:
    """The sequence number in block bytes, read without validating the block (a light parse for
    lookups among blocks a repository checked when it stored them); None when there is none."""
    try:
        value = orjson.loads(data).get("sequence_number")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class NewBlock(Struct, frozen=True):
    """A block with its address and canonical bytes: what is committed, sent and walked."""

    hash: Multihash
    data: bytes
    block: MetadataBlock

    @classmethod
    def of(cls, block: MetadataBlock) -> NewBlock:
        data = block.encode()
        return cls(Multihash.of(data), data, block)

    @classmethod
    def decode(cls, data: bytes, address: Multihash | None = None) -> NewBlock:
        """Decode ``data``; ``address`` (already checked by the caller) saves hashing it again."""
        return cls(address or Multihash.of(data), data, decode_block(data))
