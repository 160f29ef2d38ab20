"""The Arrow schema of a data slice, read from its Parquet footer in the store (two ranged reads of the
file's tail, never the data): the schema of a dataset that recorded no ``SetDataSchema``."""

from __future__ import annotations

import struct
from typing import Any

from smart_transfer.storage import ObjectStore

#: A Parquet file ends with the footer's length (4 bytes, little-endian) and the magic ``PAR1``.
_MAGIC = b"PAR1"
_TAIL = 8
#: Largest footer read (a slice's schema and row-group index; Spark's are a few KiB).
MAX_FOOTER_BYTES = 16 * 1024 * 1024


class NotParquet(ValueError):
    """The object is not a Parquet file (or its footer is too large to read)."""


def _read(store: ObjectStore, key: str, start: int, end: int) -> bytes:
    return b"".join(store.stream(key, start, end))


def footer_schema(store: ObjectStore, key: str, size: int) -> Any:
    """The ``pyarrow.Schema`` of the Parquet object ``key`` of ``size`` bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if size < len(_MAGIC) + _TAIL:
        raise NotParquet(f"{key} is too small to be Parquet")
    tail = _read(store, key, size - _TAIL, size - 1)
    (length,) = struct.unpack("<I", tail[:4])
    if tail[4:] != _MAGIC or length > min(MAX_FOOTER_BYTES, size - len(_MAGIC) - _TAIL):
        raise NotParquet(f"{key} is not a Parquet file")
    footer = _read(store, key, size - _TAIL - length, size - 1)
    try:
        # the footer's offsets point into the data, which a schema read never follows
        return pq.read_schema(pa.BufferReader(_MAGIC + footer))
    except (pa.ArrowException, OSError) as exc:
        raise NotParquet(f"{key}: unreadable Parquet footer: {exc}") from None
