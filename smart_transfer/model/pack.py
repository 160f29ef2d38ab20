"""Block packs: many blocks in one content-addressed byte string, with an index for random access.

A push stores its new blocks as one pack (one storage write instead of one per block), a pull receives
them as one, and a workspace keeps them the same way. Layout (all integers big-endian)::

    magic    8 bytes   b"STPACK1\\n"
    count    uint32    number of blocks
    index    count x ( hash 34 bytes: the block's binary multihash (code, length 0x20, digest);
                       size uint32: the block's length in bytes )
    blocks   the blocks' canonical bytes, concatenated in index order (oldest block first)

Block ``i`` starts at ``header_size(count)`` plus the sizes of the blocks before it, so a reader that
has the header (one ranged read) can fetch any single block. A pack is named by the multihash of all
of its bytes; decoding checks every block against its hash, so nothing in a pack is trusted unchecked.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator

from msgspec import Struct

from smart_transfer.model.block import MAX_BLOCK_BYTES
from smart_transfer.model.errors import InvalidBlock, InvalidMultihash
from smart_transfer.model.multihash import BINARY_LENGTH, SHA2_256, SHA3_256, Multihash

PACK_MAGIC = b"STPACK1\n"
_COUNT = struct.Struct(">I")
_ENTRY = struct.Struct(f">{BINARY_LENGTH}sI")
#: Bytes before the index: the magic and the count.
PREAMBLE_BYTES = len(PACK_MAGIC) + _COUNT.size
#: Bytes of one index entry.
ENTRY_BYTES = _ENTRY.size
#: The first two bytes of every supported binary multihash (code, then digest length 32).
_SUPPORTED_PREFIXES = frozenset({bytes((SHA2_256, 32)), bytes((SHA3_256, 32))})
#: Most blocks one pack may hold (the longest chain a walk follows).
MAX_PACK_BLOCKS = 10_000_000


def header_size(count: int) -> int:
    """Bytes of a pack's magic, count and index when it holds ``count`` blocks."""
    return PREAMBLE_BYTES + count * ENTRY_BYTES


def max_pack_bytes(count: int) -> int:
    """The largest a pack of ``count`` blocks can be (every block at the block size limit)."""
    return header_size(count) + count * MAX_BLOCK_BYTES


def encode_pack(blocks: Iterable[tuple[Multihash, bytes]]) -> bytes:
    """One pack of ``blocks`` (address and canonical bytes, oldest first)."""
    entries = list(blocks)
    index = b"".join(_ENTRY.pack(address.to_bytes(), len(data)) for address, data in entries)
    return b"".join((PACK_MAGIC, _COUNT.pack(len(entries)), index, *(data for _, data in entries)))


class PackEntry(Struct, frozen=True):
    """Where one block of a pack is: its address, first byte and size."""

    address: Multihash
    offset: int
    size: int


def read_count(preamble: bytes, max_blocks: int = MAX_PACK_BLOCKS) -> int:
    """The block count from a pack's first ``PREAMBLE_BYTES``; InvalidBlock if it is not a pack."""
    if len(preamble) < PREAMBLE_BYTES or preamble[: len(PACK_MAGIC)] != PACK_MAGIC:
        raise InvalidBlock("not a block pack (bad magic)")
    (count,) = _COUNT.unpack_from(preamble, len(PACK_MAGIC))
    if count > max_blocks:
        raise InvalidBlock(f"pack holds {count} blocks; at most {max_blocks}")
    return int(count)


def _raw_entries(header: bytes, max_blocks: int) -> Iterator[tuple[bytes, int]]:
    """The (binary address, size) of each block from a pack's header, checked: the header is whole,
    every address a supported multihash, every size within the block limit."""
    count = read_count(header, max_blocks)
    end = header_size(count)
    if len(header) < end:
        raise InvalidBlock(f"pack header is cut short ({len(header)} of {end} bytes)")
    for raw, size in _ENTRY.iter_unpack(memoryview(header)[PREAMBLE_BYTES:end]):
        if size > MAX_BLOCK_BYTES:
            raise InvalidBlock(f"pack entry of {size} bytes exceeds the {MAX_BLOCK_BYTES}-byte block limit")
        if raw[:2] not in _SUPPORTED_PREFIXES:  # the usual case checked here, the rest by Multihash
            _address(raw)
        yield raw, size


def _address(raw: bytes) -> Multihash:
    """The multihash of a binary address from a pack's index; InvalidBlock when it is not one."""
    try:
        return Multihash.from_bytes(raw)
    except InvalidMultihash as exc:
        raise InvalidBlock(f"pack index: {exc}") from None


def _entries(header: bytes, max_blocks: int) -> Iterator[tuple[Multihash, int]]:
    """The (address, size) of each block from a pack's header, checked (see ``_raw_entries``)."""
    for raw, size in _raw_entries(header, max_blocks):
        yield Multihash(raw[0], raw[2:]), size


def read_index(header: bytes, max_blocks: int = MAX_PACK_BLOCKS) -> list[PackEntry]:
    """The entries of a pack from its header (at least ``header_size(count)`` bytes), with offsets
    from the start of the pack; InvalidBlock on anything malformed."""
    entries = []
    offset = header_size(read_count(header, max_blocks))
    for address, size in _entries(header, max_blocks):
        entries.append(PackEntry(address, offset, size))
        offset += size
    return entries


def decode_pack(data: bytes, max_blocks: int = MAX_PACK_BLOCKS) -> list[tuple[Multihash, bytes]]:
    """The blocks of a pack (address and bytes, in pack order), each checked against its address;
    InvalidBlock when the pack is malformed, truncated, has trailing bytes, holds a block twice or a
    block does not match."""
    entries = list(_raw_entries(data, max_blocks))
    offset = header_size(len(entries))
    described = offset + sum(size for _, size in entries)
    if described != len(data):
        raise InvalidBlock(f"pack is {len(data)} bytes; its index describes {described}")
    blocks = []
    seen: set[bytes] = set()  # binary addresses, not Multihash objects: cheaper over 100,000 blocks
    for raw, size in entries:
        content = data[offset : offset + size]
        address = Multihash(raw[0], raw[2:])
        if raw in seen:  # a chain has each block once; repeats would only cost the reader
            raise InvalidBlock(f"block {address} is in the pack twice")
        seen.add(raw)
        if not address.matches(content):
            raise InvalidBlock(f"block {address} in the pack does not match its hash")
        blocks.append((address, content))
        offset += size
    return blocks
