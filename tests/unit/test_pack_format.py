"""The block pack format (model/pack.py): round trips, random access through the index, and every
way a hostile or damaged pack is refused before anything in it is trusted."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from smart_transfer.model import InvalidBlock, Multihash
from smart_transfer.model.block import MAX_BLOCK_BYTES
from smart_transfer.model.pack import (
    ENTRY_BYTES,
    PACK_MAGIC,
    decode_pack,
    encode_pack,
    header_size,
    max_pack_bytes,
    read_count,
    read_index,
)
from smart_transfer.protocol.errors import ProtocolError
from smart_transfer.protocol.tarball import pack_blocks
from smart_transfer.sync.bundle import bundle_from_tarball

contents = st.lists(st.binary(min_size=1, max_size=300), max_size=40, unique=True)  # a chain has each block once


def _blocks(items: list[bytes]) -> list[tuple[Multihash, bytes]]:
    return [(Multihash.of(item), item) for item in items]


@given(contents)
def test_a_pack_round_trips_and_each_block_is_where_its_index_says(items: list[bytes]) -> None:
    blocks = _blocks(items)
    pack = encode_pack(blocks)
    assert decode_pack(pack) == blocks
    assert len(pack) == header_size(len(blocks)) + sum(map(len, items)) <= max_pack_bytes(len(blocks))
    entries = read_index(pack[: header_size(read_count(pack))])  # the header alone is enough
    assert [(e.address, pack[e.offset : e.offset + e.size]) for e in entries] == blocks


def test_the_layout_is_pinned() -> None:
    # Pinned: packs are stored and sent; a change here breaks every repository and client.
    block = b'{"x":1}'
    pack = encode_pack([(Multihash.of(block), block)])
    assert pack == b"STPACK1\n" + struct.pack(">I", 1) + Multihash.of(block).to_bytes() + struct.pack(">I", 7) + block
    assert ENTRY_BYTES == 38 and PACK_MAGIC == b"STPACK1\n"


_ONE = encode_pack(_blocks([b"one"]))


@pytest.mark.parametrize(
    ("pack", "fragment"),
    [
        (b"", "bad magic"),
        (b"STPACK2\n" + _ONE[8:], "bad magic"),
        (_ONE[:20], "cut short"),
        (_ONE[:-1], "index describes"),
        (_ONE + b"\0", "index describes"),
        (PACK_MAGIC + struct.pack(">I", 11), "11 blocks; at most 10"),
        (encode_pack([(Multihash.of(b"one"), b"two")]), "does not match its hash"),
        (encode_pack(_blocks([b"a" * (MAX_BLOCK_BYTES + 1)])), "block limit"),
        (_ONE[:12] + b"\x13\x20" + _ONE[14:], "unsupported multihash code"),
        (_ONE[:12] + b"\x12\x21" + _ONE[14:], "binary multihash"),
        # a million copies of one tiny block would cost the reader a hash each for a few bytes sent
        (encode_pack(_blocks([b"e", b"e"])), "in the pack twice"),
    ],
)
def test_damaged_or_hostile_packs_are_refused(pack: bytes, fragment: str) -> None:
    with pytest.raises(InvalidBlock, match=fragment):
        decode_pack(pack, max_blocks=10)


def test_binary_multihashes_round_trip() -> None:
    address = Multihash.of(b"x")
    assert Multihash.from_bytes(address.to_bytes()) == address
    assert str(Multihash.from_bytes(address.to_bytes())) == str(address)


def test_a_pushed_tarball_may_hold_no_more_blocks_than_the_push_planned() -> None:
    tarball = pack_blocks(_blocks([b"a", b"b", b"c"]))
    with pytest.raises(ProtocolError, match="3 blocks; at most 2"):
        bundle_from_tarball(tarball, max_blocks=2)
