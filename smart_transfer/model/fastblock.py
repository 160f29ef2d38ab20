"""A typed fast path for the commonest blocks: an ``AddData`` block in canonical form, checked and
read by one compiled pattern over its bytes instead of a JSON parse, typed readers and a re-encoding.

The pattern admits only canonical spellings (keys in sorted order, compact separators, integers of
at most 18 digits without leading zeros, hashes as lowercase ``f1220``/``f1620`` text, timestamps of
ASCII digits), so every block it accepts is one the full decoder (``block.decode_block``) accepts
with the same values; the few rules a pattern cannot say (intervals) are checked after it. Bytes it
does not match are not refused here: the full decoder decides (and names what is wrong)."""

from __future__ import annotations

import re

from smart_transfer.model.events import AddData, Checkpoint, DataSlice, OffsetInterval
from smart_transfer.model.multihash import Multihash

_HASH = rb'"(f1[26]20[0-9a-f]{64})"'
#: Non-negative, canonical, and below 2**63 - 1 (MAX_SAFE_INTEGER has 19 digits).
_INT = rb"(0|[1-9][0-9]{0,17})"
_TIME = rb'"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?Z)"'
_ADD_DATA = re.compile(
    rb'\{"event":\{'
    rb'(?:"new_checkpoint":\{"physical_hash":' + _HASH + rb',"size":' + _INT + rb"\},)?"
    rb'(?:"new_data":\{"num_records":' + _INT + rb',"offset_interval":\{"end":' + _INT + rb',"start":' + _INT + rb"\},"
    rb'"physical_hash":' + _HASH + rb',"size":' + _INT + rb"\},)?"
    rb'(?:"new_watermark":' + _TIME + rb",)?"
    rb'"type":"AddData"\},'
    rb'"prev_block_hash":(?:null|' + _HASH + rb"),"
    rb'"sequence_number":' + _INT + rb","
    rb'"system_time":' + _TIME + rb"\}"
)

#: The data slice of a canonical AddData block, found anywhere in its bytes (a text value cannot hold it:
#: every quote inside one is escaped), its size captured.
_SLICE_SIZE = re.compile(
    rb'"new_data":\{"num_records":' + _INT + rb',"offset_interval":\{"end":' + _INT + rb',"start":' + _INT + rb"\},"
    rb'"physical_hash":' + _HASH + rb',"size":' + _INT + rb"\}"
)


def slice_size(data: bytes) -> int | None:
    """The size of the data slice a canonical AddData block's bytes record, without decoding the block
    (10 times faster); None when the bytes record none in canonical form (decode them to be sure)."""
    match = _SLICE_SIZE.search(data)
    return int(match.group(5)) if match is not None else None


def _hash(text: bytes) -> Multihash:
    """A multihash from text the pattern matched (so supported and well formed)."""
    decoded = text.decode()
    return Multihash(int(decoded[1:3], 16), bytes.fromhex(decoded[5:]), decoded)


def _data_slice(num: bytes, end: bytes, start: bytes, address: bytes, size: bytes) -> DataSlice | None:
    """The data slice, or None when its interval breaks a rule (the full decoder says which)."""
    interval = OffsetInterval(int(start), int(end))
    num_records = int(num)
    if interval.end < interval.start or num_records < 1 or num_records != interval.end - interval.start + 1:
        return None
    return DataSlice(_hash(address), int(size), interval, num_records)


def fast_add_data(data: bytes) -> tuple[int, Multihash | None, str, AddData] | None:
    """Sequence number, previous hash, system time and event of a canonical AddData block, or None
    when ``data`` is anything else (the caller then decodes it in full)."""
    match = _ADD_DATA.fullmatch(data)
    if match is None:
        return None
    (cp_hash, cp_size, num, end, start, data_hash, data_size, watermark, prev, seq, system_time) = match.groups()
    new_data = None
    if num is not None:
        new_data = _data_slice(num, end, start, data_hash, data_size)
        if new_data is None:
            return None
    event = AddData(
        new_data,
        Checkpoint(_hash(cp_hash), int(cp_size)) if cp_hash is not None else None,
        watermark.decode() if watermark is not None else None,
    )
    return int(seq), _hash(prev) if prev is not None else None, system_time.decode(), event
