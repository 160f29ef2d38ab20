"""A data slice's Parquet footer: its row count, schema and column statistics, read with two ranged reads
of the file's tail (never the data). The one place that reads footers: ``add`` takes a file's row count
from it, the web view and Delta Sharing take a dataset's schema from it when the chain records no
``SetDataSchema`` (``footer_fields``), and Delta Sharing's file statistics come from it."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smart_transfer.model import DataField, DataSlice, ObjectKind, ObjectRef
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.storage import ObjectStore

if TYPE_CHECKING:  # pyarrow costs a command about a second to import: only a footer read pays for it
    import pyarrow as pa
    import pyarrow.parquet as pq

#: A Parquet file ends with the footer's length (4 bytes, little-endian) and the magic ``PAR1``.
MAGIC = b"PAR1"
_TAIL = 8
#: Largest footer read (a slice's schema and row-group index; Spark's are a few KiB).
MAX_FOOTER_BYTES = 16 * 1024 * 1024


class NotParquet(ValueError):
    """The object is not a Parquet file (or its footer is too large to read)."""


class UnnamedType(ValueError):
    """A Parquet column type that has no Spark SQL name."""


def parse_footer(read: Callable[[int, int], bytes], size: int, name: str) -> pq.FileMetaData:
    """The footer of a Parquet file of ``size`` bytes, given ``read(first, last)`` of its bytes."""
    if size < len(MAGIC) + _TAIL:
        raise NotParquet(f"{name} is too small to be Parquet")
    tail = read(size - _TAIL, size - 1)
    (length,) = struct.unpack("<I", tail[:4])
    if tail[4:] != MAGIC or length > min(MAX_FOOTER_BYTES, size - len(MAGIC) - _TAIL):
        raise NotParquet(f"{name} is not a Parquet file")
    footer = read(size - _TAIL - length, size - 1)
    # pyarrow loads only when a footer is read (listings and pulls never read one)
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        # the footer's offsets point into the data, which reading the metadata never follows
        return pq.read_metadata(pa.BufferReader(MAGIC + footer))
    except (pa.ArrowException, OSError) as exc:
        raise NotParquet(f"{name}: unreadable Parquet footer: {exc}") from None


def store_footer(store: ObjectStore, key: str, size: int) -> pq.FileMetaData:
    """The footer of the Parquet object ``key`` of ``size`` bytes."""
    return parse_footer(lambda first, last: b"".join(store.stream(key, first, last)), size, key)


def slice_footer(dataset: DatasetRepository, piece: DataSlice) -> pq.FileMetaData:
    """The footer of a committed data slice of ``dataset``."""
    ref = ObjectRef(ObjectKind.DATA, piece.physical_hash, piece.size)
    return store_footer(dataset.store, dataset.object_key(ref), piece.size)


def file_footer(path: Path) -> pq.FileMetaData:
    """The footer of a local Parquet file."""

    def read(first: int, last: int) -> bytes:
        with path.open("rb") as handle:
            handle.seek(first)
            return handle.read(last - first + 1)

    return parse_footer(read, path.stat().st_size, str(path))


def sql_type(data_type: Any) -> str:
    """The Spark SQL (DDL) name of an Arrow type, as a ``SetDataSchema`` records it."""
    import pyarrow as pa  # loaded already by whoever holds an Arrow type: this names it at run time

    simple = {
        pa.bool_(): "BOOLEAN",
        pa.int8(): "TINYINT",
        pa.int16(): "SMALLINT",
        pa.int32(): "INT",
        pa.int64(): "BIGINT",
        pa.uint8(): "SMALLINT",
        pa.uint16(): "INT",
        pa.uint32(): "BIGINT",
        pa.uint64(): "DECIMAL(20,0)",
        pa.float32(): "FLOAT",
        pa.float64(): "DOUBLE",
        pa.string(): "STRING",
        pa.large_string(): "STRING",
        pa.binary(): "BINARY",
        pa.large_binary(): "BINARY",
        pa.date32(): "DATE",
    }
    if data_type in simple:
        return simple[data_type]
    if pa.types.is_timestamp(data_type):
        # Spark's TIMESTAMP is an instant (Parquet isAdjustedToUTC); a zone-less one is TIMESTAMP_NTZ
        return "TIMESTAMP" if data_type.tz is not None else "TIMESTAMP_NTZ"
    if pa.types.is_decimal(data_type):
        return f"DECIMAL({data_type.precision},{data_type.scale})"
    if pa.types.is_fixed_size_binary(data_type):
        return "BINARY"
    if pa.types.is_map(data_type):
        return f"MAP<{sql_type(data_type.key_type)}, {sql_type(data_type.item_type)}>"
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_fixed_size_list(data_type):
        return f"ARRAY<{sql_type(data_type.value_type)}>"
    if pa.types.is_struct(data_type):
        inner = ", ".join(_struct_field(data_type.field(i)) for i in range(data_type.num_fields))
        return f"STRUCT<{inner}>"
    raise UnnamedType(f"the Parquet type {data_type} has no Spark SQL name")


def _struct_field(field: pa.Field) -> str:
    name = field.name.replace("`", "``")
    return f"`{name}`: {sql_type(field.type)}" + ("" if field.nullable else " NOT NULL")


def footer_fields(metadata: pq.FileMetaData) -> tuple[DataField, ...]:
    """A slice's columns as a ``SetDataSchema`` would record them: the schema of a dataset whose chain
    records none (the web view and Delta Sharing's metadata both show this)."""
    return tuple(DataField(f.name, sql_type(f.type), f.nullable) for f in metadata.schema.to_arrow_schema())


def slice_fields(dataset: DatasetRepository, piece: DataSlice) -> tuple[DataField, ...]:
    """The columns of a committed slice, from its footer: the schema of a dataset whose chain records no
    ``SetDataSchema`` (its first slice's), the one rule the web view and Delta Sharing's metadata share.
    Raises NotParquet or UnnamedType."""
    return footer_fields(slice_footer(dataset, piece))


def schema_at(
    dataset: DatasetRepository, recorded: tuple[DataField, ...] | None, piece: DataSlice | None
) -> tuple[tuple[DataField, ...], str]:
    """A version's columns and where they come from: ``recorded`` (its newest SetDataSchema's) if there is
    one, "recorded"; else ``piece``'s footer, "footer"; else none, "" (no slice, or one that is not
    Parquet or holds a type Spark cannot name)."""
    if recorded is not None:
        return recorded, "recorded"
    if piece is None:
        return (), ""
    try:
        return slice_fields(dataset, piece), "footer"
    except (NotParquet, UnnamedType):
        return (), ""
