"""Reading the inputs of one run with Spark's own data sources, keeping the input's schema:

- CSV as RFC 4180 (and Python's ``csv`` module) writes it: a header line, fields quoted with ``"``, a
  quote inside a quoted field doubled, line breaks allowed inside quoted fields. Every column is text
  unless a schema is given (``--schema`` or the dataset's recorded one); CSV has no null, so an empty
  text field is the empty string (in typed columns, an empty field is null).
- JSON lines: one object per line; types as Spark infers them over the whole input, columns in the
  order they first appear (Spark alone would sort them by name).
- Parquet: the file's own types.

Rows that do not parse are kept, marked in a corrupt-record column, so that the job can name the
first one (file and record number) instead of failing somewhere inside Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import Any

from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention
from pyspark.sql.types import StringType, StructField, StructType

from smart_transfer.ingest.errors import IngestError
from smart_transfer.ingest.inputs import Input, checked_header, local_csv_header
from smart_transfer.model.events import OFFSET_COLUMN

#: Columns the job adds start with this; an input column may not.
INTERNAL_PREFIX = "__st_"
CORRUPT = "__st_corrupt"
#: Where a row comes from, in input order: which input, which file, which split of it, which row.
INPUT, FILE, SPLIT, ROW = "__st_input", "__st_file", "__st_split", "__st_row"
SEGMENT = (INPUT, FILE, SPLIT)
#: More distinct top-level JSON keys than this is an error (the same bound as a recorded schema).
MAX_COLUMNS = 1000

CSV_OPTIONS = {
    "header": "true",
    "multiLine": "true",  # line breaks inside quoted fields (each file is then read by one task)
    "quote": '"',
    "escape": '"',  # RFC 4180: a quote inside a quoted field is doubled; a backslash is just a character
    "encoding": "UTF-8",
    "mode": "PERMISSIVE",
    "columnNameOfCorruptRecord": CORRUPT,
    "enforceSchema": "false",  # every file's header is checked against the schema
}
JSON_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT, "encoding": "UTF-8"}


def column(name: str) -> Any:
    """A column by its exact name (dots, spaces and backticks in names are data, not syntax)."""
    return F.col("`" + name.replace("`", "``") + "`")


def _csv_header(spark: Any, item: Input) -> list[str]:
    """The column names, checked: read without Spark for a local file, else by Spark. Every file's
    header is checked against them when Spark reads the data."""
    local = local_csv_header(item)
    if local is not None:
        return local
    options = {k: v for k, v in CSV_OPTIONS.items() if k in ("header", "multiLine", "quote", "escape", "encoding")}
    return checked_header(item, list(spark.read.options(**options).csv(item.uri).columns))


def _read_csv(spark: Any, item: Input, types: StructType | None) -> Any:
    header = _csv_header(spark, item)
    known = {f.name: f.dataType for f in types.fields} if types is not None else {}
    fields = [StructField(name, known.get(name, StringType())) for name in header]
    frame = spark.read.options(**CSV_OPTIONS).schema(StructType([*fields, StructField(CORRUPT, StringType())]))
    frame = frame.csv(item.uri)
    # CSV has no null: an empty text field is the empty string (Spark would read it as null)
    ordered = [
        F.coalesce(column(f.name), F.lit("")).alias(f.name) if f.dataType == StringType() else column(f.name)
        for f in fields
    ]
    return frame.select(*ordered, CORRUPT)


def _json_key_order(spark: Any, item: Input) -> list[str]:
    """Top-level keys in the order they first appear in the input (one pass over its text)."""
    text = spark.read.text(item.uri)
    where = text.metadataColumn("_metadata")
    keys = text.select(
        where.file_path.alias(FILE),
        where.file_block_start.alias(SPLIT),
        F.monotonically_increasing_id().alias(ROW),
        F.posexplode(F.json_object_keys("value")).alias("pos", "key"),
    )
    first = keys.groupBy("key").agg(F.min(F.struct(FILE, SPLIT, ROW, "pos")).alias("first"))
    found = first.orderBy("first").limit(MAX_COLUMNS + 1).collect()
    if len(found) > MAX_COLUMNS:
        raise IngestError(f"{item.path}: more than {MAX_COLUMNS} distinct top-level keys")
    return [row["key"] for row in found]


def _json_schema(spark: Any, item: Input, order: list[str], recorded: StructType | None) -> StructType:
    """Types as Spark infers them over the whole input, columns in first-appearance order. Against a
    recorded schema, a column null (or absent) in every record takes the recorded type; any other
    column keeps its inferred type, so a mismatch shows in the schema check."""
    options = {**JSON_OPTIONS, "dropFieldIfAllNull": "true" if recorded is not None else "false"}
    inferred = {f.name: f for f in spark.read.options(**options).json(item.uri).schema.fields if f.name != CORRUPT}
    if recorded is None:
        return StructType([inferred[name] for name in order if name in inferred])
    known = {f.name for f in recorded.fields}
    fields = [inferred.get(f.name, f) for f in recorded.fields]
    return StructType(
        fields + [inferred.get(name, StructField(name, StringType())) for name in order if name not in known]
    )


def _read_json(spark: Any, item: Input, given: StructType | None, recorded: StructType | None) -> Any:
    order = _json_key_order(spark, item)
    if not order:
        raise IngestError(f"{item.path}: empty input (no records)")
    if given is None:
        types = _json_schema(spark, item, order, recorded)
    else:  # the user's types: Spark converts each value to them (a value that does not fit is malformed)
        extra = [name for name in order if name not in given.fieldNames()]
        if extra:
            raise IngestError(f"{item.path}: column(s) {', '.join(extra[:10])} not in the schema")
        types = given
    schema = StructType([*types.fields, StructField(CORRUPT, StringType())])
    return spark.read.options(**JSON_OPTIONS).schema(schema).json(item.uri)


def _read_parquet(spark: Any, item: Input, types: StructType | None) -> Any:
    reader = spark.read if types is None else spark.read.schema(types)
    frame = reader.parquet(item.uri)
    return frame.select("*", F.lit(None).cast("string").alias(CORRUPT))


def read_input(spark: Any, item: Input, given: StructType | None, recorded: StructType | None) -> Any:
    """One input as a DataFrame: its columns, the corrupt-record column, and where each row comes from.
    ``given``: the user's schema; ``recorded``: the dataset's. CSV is read with either (else as text),
    JSON with the given one (else inferred, see :func:`_json_schema`), Parquet with the given one (else
    its own)."""
    if item.fmt == "csv":
        frame = _read_csv(spark, item, given if given is not None else recorded)
    elif item.fmt == "json":
        frame = _read_json(spark, item, given, recorded)
    else:
        frame = _read_parquet(spark, item, given)
    where = frame.metadataColumn("_metadata")
    data = [c for c in frame.columns if c != CORRUPT]
    bad = [c for c in data if c == OFFSET_COLUMN or c.startswith(INTERNAL_PREFIX)]
    if bad:
        raise IngestError(f"{item.path}: the input already has a column named {bad[0]!r} (reserved)")
    return frame.select(
        *[column(c) for c in data],
        CORRUPT,
        F.lit(item.index).alias(INPUT),
        where.file_path.alias(FILE),
        where.file_block_start.alias(SPLIT),
        # row order inside one split of one file (ids grow with the row within a partition)
        F.monotonically_increasing_id().alias(ROW),
    )


def union(frames: Sequence[Any], columns: Sequence[str]) -> Any:
    """The inputs one after the other, each with ``columns`` in that order."""
    chosen = [f.select(*[column(c) for c in columns], CORRUPT, *SEGMENT, ROW) for f in frames]
    return reduce(lambda a, b: a.union(b), chosen)
