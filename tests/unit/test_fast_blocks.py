"""The typed fast path for AddData blocks (model/fastblock.py) never accepts what the full decoder
refuses, and gives the same block for what it accepts: checked on generated blocks and on every
single-byte change of them (a change the full decoder accepts must read the same both ways). Its
slice-size pattern reads the size the decoder reads."""

from __future__ import annotations

from datetime import datetime

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from smart_transfer.model import SHA2_256, SHA3_256, AddData, Checkpoint, DataSlice, InvalidBlock, OffsetInterval
from smart_transfer.model.block import MetadataBlock, decode_block, decode_block_fully
from smart_transfer.model.fastblock import fast_add_data, slice_size
from smart_transfer.model.multihash import Multihash

hashes = st.builds(Multihash, st.sampled_from([SHA2_256, SHA3_256]), st.binary(min_size=32, max_size=32))
timestamps = st.datetimes(min_value=datetime(1970, 1, 1)).map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
#: Integers around the limits the pattern cares about (18 and 19 digits, 2**63 - 1).
numbers = st.one_of(st.integers(0, 2**20), st.integers(10**17, 10**19), st.just(2**63 - 1))
slices = st.builds(
    lambda h, size, start, length: DataSlice(h, size, OffsetInterval(start, start + length), length + 1),
    hashes,
    numbers,
    numbers,
    st.integers(0, 2**20),
)
add_data = st.builds(
    AddData, st.none() | slices, st.none() | st.builds(Checkpoint, hashes, numbers), st.none() | timestamps
)
blocks = st.builds(MetadataBlock, numbers, st.none() | hashes, timestamps, add_data)

#: Bytes a change may put in: digits, hex letters in both cases, JSON punctuation, space, non-ASCII.
REPLACEMENTS = b'0179afAF-:.TZ",{}[] n\xd9'


def _bytes(block: MetadataBlock) -> bytes:
    """The block's canonical spelling, even with integers beyond what encode() allows."""
    return orjson.dumps(block.to_dict(), option=orjson.OPT_SORT_KEYS)


def _full(data: bytes) -> MetadataBlock | None:
    try:
        return decode_block_fully(data)
    except InvalidBlock:
        return None


def _same(fast: tuple[int, Multihash | None, str, AddData], block: MetadataBlock) -> bool:
    return fast == (block.sequence_number, block.prev_block_hash, block.system_time, block.event)


@settings(max_examples=300)
@given(blocks)
def test_the_fast_path_reads_valid_blocks_as_the_full_decoder_does(block: MetadataBlock) -> None:
    data = _bytes(block)
    full = _full(data)
    fast = fast_add_data(data)
    if full is None:  # e.g. an integer beyond 2**63 - 1: the fast path must refuse it too
        assert fast is None
        return
    assert full == block
    if fast is not None:
        assert _same(fast, full)
    assert decode_block(data) == block


@settings(max_examples=200)
@given(blocks)
def test_the_slice_size_pattern_reads_what_the_decoder_reads(block: MetadataBlock) -> None:
    data = _bytes(block)
    full = _full(data)
    if full is None or not isinstance(full.event, AddData) or full.event.new_data is None:
        assert full is None or slice_size(data) is None  # no slice: none found
        return
    found = slice_size(data)
    assert found in (None, full.event.new_data.size)  # None: the caller decodes (a size of 19 digits)
    if fast_add_data(data) is not None:  # what the fast path reads, the pattern reads too
        assert found == full.event.new_data.size


@settings(max_examples=300)
@given(blocks, st.data())
def test_a_changed_byte_is_accepted_by_the_fast_path_only_if_the_full_decoder_accepts_it(
    block: MetadataBlock, data: st.DataObject
) -> None:
    original = _bytes(block)
    position = data.draw(st.integers(0, len(original) - 1))
    replacement = data.draw(st.sampled_from(REPLACEMENTS))
    for changed in (
        original[:position] + bytes((replacement,)) + original[position + 1 :],  # replaced
        original[:position] + bytes((replacement,)) + original[position:],  # inserted
        original[:position] + original[position + 1 :],  # deleted
    ):
        fast = fast_add_data(changed)
        if fast is not None:
            full = _full(changed)
            assert full is not None, changed
            assert _same(fast, full)


def test_the_fast_path_takes_the_common_blocks() -> None:
    """The blocks a long chain is made of do take the fast path (else it would gain nothing)."""
    prev = Multihash.of(b"seed")
    watermark = MetadataBlock(7, prev, "2024-01-31T12:00:00Z", AddData(new_watermark="2024-01-31T12:00:00Z"))
    full = MetadataBlock(
        8,
        prev,
        "2024-01-31T12:00:00.123456Z",
        AddData(DataSlice(prev, 10, OffsetInterval(5, 9), 5), Checkpoint(prev, 3), "2024-01-31T12:00:00Z"),
    )
    for block in (watermark, full):
        fast = fast_add_data(block.encode())
        assert fast is not None and _same(fast, block)


def test_rules_a_pattern_cannot_say_are_left_to_the_full_decoder() -> None:
    prev = Multihash.of(b"seed")
    for interval, records in ((OffsetInterval(9, 5), 1), (OffsetInterval(5, 9), 4), (OffsetInterval(0, 0), 0)):
        event = AddData(DataSlice(prev, 10, interval, records))
        data = MetadataBlock(1, prev, "2024-01-31T12:00:00Z", event).encode()
        assert fast_add_data(data) is None
        assert _full(data) is None
