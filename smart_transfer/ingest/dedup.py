"""Key mode, in Spark: the latest occurrence of each key in the run, compared with the previous
checkpoint's mirror (key -> offset, row hash) by a join. Rows whose key is new or whose content
changed are added; identical rows are not."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import Window
from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from smart_transfer.ingest.positions import POSITION
from smart_transfer.ingest.sources import column

KEY, KEY_HASH, ROW_HASH, IS_NEW = "__st_key", "__st_key_hash", "__st_row_hash", "__st_is_new"
_PREVIOUS_ROW = "__st_previous_row"
#: The mirror files' columns (Parquet, one file per bucket).
MIRROR_SCHEMA = StructType(
    [
        StructField("key", BinaryType(), False),
        StructField("offset", LongType(), False),
        StructField("row_hash", BinaryType(), False),
    ]
)
# JSON of keys and rows is the identity of a key and of a version: fixed so that it never depends on
# the session (time zone) and a null differs from an absent column
_JSON_OPTIONS = {"timeZone": "UTC", "ignoreNullFields": "false"}


def with_identity(frame: Any, columns: Sequence[str], primary_key: Sequence[str]) -> Any:
    """``frame`` plus each row's key (JSON bytes), the key's CRC-32 and the row's SHA-256."""
    key = F.to_json(F.struct(*[column(c) for c in primary_key]), _JSON_OPTIONS).cast("binary")
    row = F.unhex(F.sha2(F.to_json(F.struct(*[column(c) for c in columns]), _JSON_OPTIONS), 256))
    keyed = frame.withColumn(KEY, key)
    return keyed.withColumn(KEY_HASH, F.crc32(F.col(KEY))).withColumn(ROW_HASH, row)


def latest(frame: Any) -> Any:
    """The last occurrence of every key in the run (the highest position wins)."""
    last_first = F.row_number().over(Window.partitionBy(KEY).orderBy(F.col(POSITION).desc()))
    return frame.withColumn("__st_rank", last_first).filter(F.col("__st_rank") == 1).drop("__st_rank")


def read_mirror(spark: Any, files: Sequence[str]) -> Any:
    """The previous checkpoint's mirror as (KEY, offset, ROW_HASH); empty without files."""
    if not files:
        return spark.createDataFrame([], MIRROR_SCHEMA).select(
            F.col("key").alias(KEY), "offset", F.col("row_hash").alias(ROW_HASH)
        )
    mirror = spark.read.schema(MIRROR_SCHEMA).parquet(*files)
    return mirror.select(F.col("key").alias(KEY), "offset", F.col("row_hash").alias(ROW_HASH))


def changes(current: Any, previous: Any) -> Any:
    """Rows of ``current`` (one per key) whose key is new or whose row hash differs, with IS_NEW."""
    before = previous.select(KEY, F.col(ROW_HASH).alias(_PREVIOUS_ROW))
    joined = current.join(before, KEY, "left")
    differs = F.col(_PREVIOUS_ROW).isNull() | (F.col(_PREVIOUS_ROW) != F.col(ROW_HASH))
    return joined.filter(differs).withColumn(IS_NEW, F.col(_PREVIOUS_ROW).isNull()).drop(_PREVIOUS_ROW)
