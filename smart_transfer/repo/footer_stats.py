"""A data slice's column statistics, as the Delta protocol defines them (``numRecords``, ``minValues``,
``maxValues``, ``nullCount``), taken from its Parquet footer's row-group statistics. Only top-level
columns whose type orders its values get them: integers, floats, decimals, strings, dates and
timestamps; never booleans, binary or nested columns. Every bound is safe: a minimum is at most every
value and a maximum at least every value (a long string's maximum is left out rather than cut; a
timestamp's is rounded up to the millisecond the Delta text can say), so a reader that skips a file by
them never skips a row that matches."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

#: Longest string bound kept (Delta's own writers cut at 32; a longer minimum is cut, a maximum dropped).
MAX_STRING_BOUND = 64
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROS = {"s": 1_000_000, "ms": 1000, "us": 1, "ns": 1}
_PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
    "int": int,
    "float": (float, int),
    "decimal": decimal.Decimal,
    "string": str,
    "date": dt.date,
}


@dataclass(frozen=True, slots=True)
class ColumnStats:
    """One column's bounds in a slice (None: unknown). ``kind`` is how values compare: ``int``,
    ``float``, ``decimal``, ``string``, ``date``, ``timestamp`` or ``timestamp_ntz`` (microseconds)."""

    kind: str
    low: Any
    high: Any
    nulls: int | None


@dataclass(frozen=True, slots=True)
class SliceStats:
    """A slice's row count and the bounds of its orderable columns."""

    num_records: int
    columns: dict[str, ColumnStats]

    def to_delta(self) -> dict[str, Any]:
        """The Delta ``stats`` object (JSON numbers for decimals keep every digit)."""
        low = {n: _delta_value(c.kind, c.low, False) for n, c in self.columns.items() if c.low is not None}
        high = {n: _delta_value(c.kind, c.high, True) for n, c in self.columns.items() if c.high is not None}
        nulls = {n: c.nulls for n, c in self.columns.items() if c.nulls is not None}
        return {
            "numRecords": self.num_records,
            "minValues": {n: v for n, v in low.items() if v is not None},
            "maxValues": {n: v for n, v in high.items() if v is not None},
            "nullCount": nulls,
        }


def _delta_value(kind: str, value: Any, high: bool) -> Any:
    """A bound as Delta writes it (None: not sayable: a time outside years 1..9999)."""
    if kind == "decimal":
        return orjson.Fragment(str(value))
    if kind == "date":
        return value.isoformat()
    if kind in ("timestamp", "timestamp_ntz"):
        millis = -(-value // 1000) if high else value // 1000  # the text says milliseconds: round outwards
        try:
            moment = (_EPOCH + dt.timedelta(milliseconds=millis)).isoformat(timespec="milliseconds")
        except OverflowError:
            return None
        return moment.replace("+00:00", "Z" if kind == "timestamp" else "")
    return value


def stats_kind(data_type: Any) -> str | None:
    """How values of an Arrow type compare in statistics (None: the type gets none)."""
    if pa.types.is_integer(data_type):
        return "int"
    if pa.types.is_float32(data_type) or pa.types.is_float64(data_type):
        return "float"
    if pa.types.is_decimal(data_type):
        return "decimal"
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type):
        return "string"
    if pa.types.is_date32(data_type):
        return "date"
    if pa.types.is_timestamp(data_type):
        return "timestamp" if data_type.tz is not None else "timestamp_ntz"
    return None


def _leaves(data_type: Any) -> int:
    """How many Parquet leaf columns an Arrow type is stored as."""
    if pa.types.is_struct(data_type):
        return sum(_leaves(data_type.field(i).type) for i in range(data_type.num_fields))
    if pa.types.is_map(data_type):
        return _leaves(data_type.key_type) + _leaves(data_type.item_type)
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_fixed_size_list(data_type):
        return _leaves(data_type.value_type)
    return 1


def _time_bound(data_type: Any, raw: int, high: bool) -> int:
    """A raw timestamp as microseconds, rounded outwards."""
    if data_type.unit == "ns":
        return -(-raw // 1000) if high else raw // 1000
    return raw * _MICROS[data_type.unit]


def _bound(kind: str, data_type: Any, stats: Any, high: bool) -> Any:
    """One row group's minimum or maximum as a comparable value (None: not a safe bound)."""
    if kind in ("timestamp", "timestamp_ntz"):
        return _time_bound(data_type, int(stats.max_raw if high else stats.min_raw), high)
    value: Any = stats.max if high else stats.min
    if not isinstance(value, _PYTHON_TYPES[kind]) or isinstance(value, bool):
        return None  # a footer without the logical type (raw bytes, unscaled integers): no safe bound
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str) and len(value) > MAX_STRING_BOUND:
        return None if high else value[:MAX_STRING_BOUND]
    return value


def _column(metadata: pq.FileMetaData, leaf: int, kind: str, data_type: Any) -> ColumnStats:
    lows, highs, nulls, known = [], [], 0, True
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        stats = group.column(leaf).statistics
        if stats is None or not stats.has_null_count:
            return ColumnStats(kind, None, None, None)
        nulls += stats.null_count
        if stats.has_min_max:
            lows.append(_bound(kind, data_type, stats, False))
            highs.append(_bound(kind, data_type, stats, True))
        elif stats.null_count != group.num_rows:  # values without bounds: nothing is known
            known = False
    low = min(lows) if known and lows and None not in lows else None
    high = max(highs) if known and highs and None not in highs else None
    return ColumnStats(kind, low, high, nulls)


def footer_stats(metadata: pq.FileMetaData) -> SliceStats:
    """The statistics of the slice whose footer is ``metadata``."""
    columns: dict[str, ColumnStats] = {}
    leaf = 0
    for field in metadata.schema.to_arrow_schema():
        kind = stats_kind(field.type)
        if kind is not None:
            columns[field.name] = _column(metadata, leaf, kind, field.type)
        leaf += _leaves(field.type)
    return SliceStats(metadata.num_rows, columns)


#: The stored form's version: a change of ``to_bytes`` bumps it, and the old records are never read.
STATS_FORMAT = 1


def _stored_bound(kind: str, value: Any) -> Any:
    if value is None:
        return None
    if kind == "decimal":
        return str(value)
    if kind == "date":
        return value.isoformat()
    return value  # int, float (orjson writes the shortest text that reads back the same), str, micros


def _read_bound(kind: str, value: Any) -> Any:
    if value is None:
        return None
    if kind == "decimal":
        return decimal.Decimal(value)
    if kind == "date":
        return dt.date.fromisoformat(value)
    return value


def stats_to_bytes(stats: SliceStats) -> bytes:
    """A slice's statistics as bytes that ``stats_from_bytes`` reads back equal (JSON)."""
    columns = {
        name: [c.kind, _stored_bound(c.kind, c.low), _stored_bound(c.kind, c.high), c.nulls]
        for name, c in stats.columns.items()
    }
    return orjson.dumps({"n": stats.num_records, "c": columns})


def stats_from_bytes(raw: bytes) -> SliceStats:
    """Statistics ``stats_to_bytes`` wrote."""
    obj = orjson.loads(raw)
    columns = {
        name: ColumnStats(kind, _read_bound(kind, low), _read_bound(kind, high), nulls)
        for name, (kind, low, high, nulls) in obj["c"].items()
    }
    return SliceStats(obj["n"], columns)
