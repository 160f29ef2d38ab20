"""A dataset's schema (the SetDataSchema event) and what the chain says the next ingest starts from.

Rule: every ingest into a dataset has exactly the recorded columns with the recorded types, matched
by name (column order in a file may differ; slices keep the recorded order). Nullability is not
compared: Spark reads every file column as nullable. There is no implicit evolution: a run whose
columns or types differ fails, naming the first differences, and changes nothing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from smart_transfer.ingest.errors import IngestError
from smart_transfer.model import AddData, DataField, ObjectRef, SetDataSchema, decode_block
from smart_transfer.model.block import MAX_BLOCK_BYTES
from smart_transfer.model.encoding import canonical_bytes
from smart_transfer.model.events import OFFSET_COLUMN
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.layout import ObjectKind

OFFSET_FIELD = DataField(OFFSET_COLUMN, "BIGINT", False)
#: Room a block needs around its event (sequence number, hashes, time).
_BLOCK_OVERHEAD = 512
#: How many differences an error names.
_SHOWN = 5


@dataclass(frozen=True, slots=True)
class ChainState:
    """What the dataset's chain says an ingest continues from."""

    schema: SetDataSchema | None
    checkpoint: ObjectRef | None

    @property
    def columns(self) -> tuple[DataField, ...] | None:
        """The recorded data columns (``offset`` left out: it is not read from inputs); None before
        a schema is recorded."""
        if self.schema is None:
            return None
        return tuple(f for f in self.schema.fields if f.name != OFFSET_FIELD.name)


def chain_state(dataset: DatasetRepository) -> ChainState:
    """The latest SetDataSchema and the latest checkpoint on the dataset's chain (one pass over the
    block bytes; only a schema block is fully decoded)."""
    tip = dataset.tip()
    schema: SetDataSchema | None = None
    checkpoint: ObjectRef | None = None
    if tip is None:
        return ChainState(None, None)
    for _, data in dataset.blocks_after(tip, None):
        event = orjson.loads(data)["event"]
        if event["type"] == SetDataSchema.TYPE:
            decoded = decode_block(data).event
            assert isinstance(decoded, SetDataSchema)
            schema = decoded
        elif event["type"] == AddData.TYPE and event.get("new_checkpoint") is not None:
            entry = AddData.from_dict(event, "event").new_checkpoint
            assert entry is not None
            checkpoint = ObjectRef(ObjectKind.CHECKPOINT, entry.physical_hash, entry.size)
    return ChainState(schema, checkpoint)


def sql_type(spark: Any, data_type: Any) -> str:
    """A Spark type as DDL (``DECIMAL(10,2)``), which Spark parses back to the same type."""
    return str(spark._jvm.org.apache.spark.sql.types.DataType.fromJson(data_type.json()).sql())


def fields_of(spark: Any, struct: Any) -> tuple[DataField, ...]:
    return tuple(DataField(f.name, sql_type(spark, f.dataType), bool(f.nullable)) for f in struct.fields)


def struct_of(fields: Sequence[DataField]) -> Any:
    """The Spark schema of recorded fields (``offset`` left out: it is not read from inputs)."""
    # pyspark (an optional extra) loads only with a Spark job
    from pyspark.sql.types import DataType, StructField, StructType

    return StructType(
        [StructField(f.name, DataType.fromDDL(f.type), f.nullable) for f in fields if f.name != OFFSET_FIELD.name]
    )


def parse_ddl(ddl: str) -> Any:
    """``--schema``: Spark DDL such as ``id INT, name STRING, amount DECIMAL(10,2)``."""
    # pyspark (an optional extra) loads only with a Spark job
    from pyspark.sql.types import StructType, _parse_datatype_string

    try:
        parsed = _parse_datatype_string(ddl)
    except Exception as exc:  # Spark's parser raises through py4j
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise IngestError(f"--schema: not a Spark DDL schema: {first[:200]}") from None
    if not isinstance(parsed, StructType) or not parsed.fields:
        raise IngestError("--schema: expected columns, e.g. 'id INT, name STRING'")
    return parsed


def difference(expected: Sequence[DataField], actual: Sequence[DataField]) -> str | None:
    """What differs between two column lists by name and type, or None when they match."""
    want = {f.name: f.type for f in expected}
    have = {f.name: f.type for f in actual}
    problems = [f"missing column {name!r}" for name in want if name not in have]
    problems += [f"unexpected column {name!r}" for name in have if name not in want]
    problems += [f"column {n!r} is {have[n]}, not {t}" for n, t in want.items() if n in have and have[n] != t]
    if not problems:
        return None
    more = f" (and {len(problems) - _SHOWN} more)" if len(problems) > _SHOWN else ""
    return "; ".join(problems[:_SHOWN]) + more


def schema_event(columns: Sequence[DataField]) -> SetDataSchema:
    """The SetDataSchema of a first ingest: ``offset`` then the input's columns."""
    event = SetDataSchema((OFFSET_FIELD, *columns))
    size = len(canonical_bytes(event.to_dict())) + _BLOCK_OVERHEAD
    if size > MAX_BLOCK_BYTES:
        raise IngestError(f"the input's schema is too large to record ({size} bytes; blocks hold {MAX_BLOCK_BYTES})")
    return event
