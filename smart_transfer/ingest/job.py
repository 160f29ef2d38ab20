"""The Spark job of one ingest run: read the inputs, check their schema, number the rows in input
order, keep the new and changed ones (key mode) or all (append mode), write them as one Parquet
slice, and write the next checkpoint. The driver sees one line per split and per bucket, never a row
or a key. It writes only into ``work``; :mod:`smart_transfer.ingest.api` commits the result."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention
from pyspark.sql.types import StructType

from smart_transfer.ingest.dedup import IS_NEW, KEY_HASH, changes, latest, read_mirror, with_identity
from smart_transfer.ingest.errors import IngestError, from_spark, spark_failure
from smart_transfer.ingest.inputs import Input, local_files
from smart_transfer.ingest.parquet import normalize
from smart_transfer.ingest.positions import POSITION, number, split_table, take_census, with_position
from smart_transfer.ingest.schema import difference, fields_of, schema_event, struct_of
from smart_transfer.ingest.sources import CORRUPT, INTERNAL_PREFIX, ROW, column, read_input, union
from smart_transfer.ingest.state import IngestState, depth_for
from smart_transfer.ingest.state_writer import assemble, assemble_sources, bucket_of, entries, write_buckets
from smart_transfer.model import DataField
from smart_transfer.model.events import OFFSET_COLUMN

#: Where Spark keeps the parsed input and the rows to add between the job's passes. On disk only: a
#: block read back from disk into memory is allocated whole, and a large one exhausts a default heap.
CACHE_LEVEL = StorageLevel.DISK_ONLY
#: Row groups of the file Spark writes, which the driver then rewrites one at a time (see parquet.py).
SPARK_ROW_GROUP_BYTES = 4 * 1024 * 1024
#: Input bytes per partition the parsed rows are spread over (when Spark's own read gives fewer).
INPUT_PARTITION_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class JobSpec:
    """What one run works on (everything the driver knows before Spark reads a row)."""

    inputs: Sequence[Input]
    primary_key: tuple[str, ...]
    user_schema: Any  # StructType from --schema, or None
    recorded: tuple[DataField, ...] | None  # the dataset's columns (offset left out), or None
    previous: IngestState | None
    previous_dir: Path | None
    fingerprints: Sequence[bytes]  # append mode: inputs to remember
    next_offset: int
    work: Path


@dataclass(frozen=True)
class JobOutcome:
    """What the job wrote into ``work`` (nothing is visible yet)."""

    rows_read: int
    rows_added: int
    columns: tuple[DataField, ...]
    slice_file: Path | None
    checkpoint_dir: Path | None


class _Cache:
    """Frames persisted during the job, released at its end (a caller's session lives on)."""

    def __init__(self) -> None:
        self.frames: list[Any] = []

    def keep(self, frame: Any) -> Any:
        self.frames.append(frame.persist(CACHE_LEVEL))
        return frame

    def release(self) -> None:
        for frame in self.frames:
            with contextlib.suppress(Exception):  # a JVM that died has nothing left to release
                frame.unpersist()


def _expected(spec: JobSpec, spark: Any) -> tuple[tuple[DataField, ...] | None, str]:
    if spec.recorded is not None:
        return spec.recorded, "the dataset's schema"
    if spec.user_schema is not None:
        return fields_of(spark, spec.user_schema), "--schema"
    return None, ""


def _read_named(spark: Any, item: Input, given: Any, recorded: Any) -> Any:
    """read_input, with Spark's refusals of a file's schema (found before any row is read, so Spark
    names no file) said about this input."""
    try:
        return read_input(spark, item, given, recorded)
    except IngestError:
        raise
    except Exception as exc:
        if not from_spark(exc):
            raise
        raise spark_failure(exc, about=item.path) from None


def read_all(spark: Any, spec: JobSpec) -> tuple[Any, tuple[DataField, ...]]:
    """Every input read and checked against the expected columns; returns them one after the other
    (not yet persisted) and the columns in the dataset's order."""
    frames, expected = _read_matching(spark, spec)
    # data columns are recorded nullable, as every slice writes them (see parquet.normalize)
    expected = tuple(DataField(f.name, f.type, True) for f in expected)
    names = [f.name for f in expected]
    missing = [c for c in spec.primary_key if c not in names]
    if missing:
        raise IngestError(f"primary key column(s) {', '.join(missing)} not in the input (columns: {', '.join(names)})")
    if spec.recorded is None:
        schema_event(expected)  # fails now, before any work, if it could not be recorded
    return spread(spark, union(frames, names), spec.inputs), expected


def _read_matching(spark: Any, spec: JobSpec) -> tuple[list[Any], tuple[DataField, ...]]:
    """Every input read, each checked to have the expected columns (the dataset's, those of
    ``--schema``, or else those of the first input): the frames and those columns."""
    expected, source = _expected(spec, spark)
    recorded = struct_of(spec.recorded) if spec.recorded is not None else None
    frames = []
    for item in spec.inputs:
        frame = _read_named(spark, item, spec.user_schema, recorded)
        data = StructType([f for f in frame.schema.fields if not f.name.startswith(INTERNAL_PREFIX)])
        columns = fields_of(spark, data)
        if expected is None:
            expected, source = columns, f"the first input ({spec.inputs[0].path})"
        problem = difference(expected, columns)
        if problem is not None:
            raise IngestError(f"{item.path}: does not match {source}: {problem}")
        frames.append(frame)
    assert expected is not None
    return frames, expected


def spread(spark: Any, frame: Any, inputs: Sequence[Input]) -> Any:
    """Spread the rows over enough partitions before anything else runs on them: Spark reads a CSV
    file (multi-line records) in one task, and 5M rows in one partition would be hashed in one task
    and cached as one block larger than a default heap. Rows keep where they came from (columns)."""
    sizes = [local_files(item.path) for item in inputs]
    total = sum(f.stat().st_size for files in sizes if files for f in files)
    wanted = max(spark.sparkContext.defaultParallelism, -(-total // INPUT_PARTITION_BYTES))
    if frame.rdd.getNumPartitions() >= wanted:
        return frame
    return frame.repartition(wanted, F.col(ROW))


def write_slice(numbered: Any, columns: Sequence[str], work: Path) -> Path:
    """The numbered rows as one Parquet file in offset order, rewritten deterministically."""
    spark_dir = work / "slice-spark"
    # one file, so one task writes it: sort inside that task (spilling as needed), no range sampling
    output = numbered.select(OFFSET_COLUMN, *[column(c) for c in columns]).repartition(1)
    writer = output.sortWithinPartitions(OFFSET_COLUMN).write.option("parquet.block.size", SPARK_ROW_GROUP_BYTES)
    writer.parquet(str(spark_dir))
    written = next(spark_dir.glob("part-*.parquet"), None)
    if written is None:
        raise IngestError("Spark wrote no data file")
    target = work / "slice.parquet"
    normalize(written, target)
    shutil.rmtree(spark_dir)
    return target


def _buckets_in(frame: Any, depth: int) -> set[int]:
    """Which buckets a frame's keys fall in (at most 2**depth small numbers reach the driver)."""
    found = frame.select(bucket_of(F.col(KEY_HASH), depth).alias("bucket")).distinct().collect()
    return {int(row["bucket"]) for row in found}


def _mirror(spark: Any, spec: JobSpec, buckets: set[int] | None) -> Any:
    """The previous checkpoint's entries of ``buckets`` (None: all), read from their mirror files."""
    previous, where = spec.previous, spec.previous_dir
    if previous is None or where is None:
        return read_mirror(spark, [])
    chosen = [f for b, f in sorted(previous.buckets.items()) if buckets is None or b in buckets]
    return read_mirror(spark, [str(where / f.mirror) for f in chosen])


def _keyed(spark: Any, spec: JobSpec, placed: Any, columns: Sequence[str], cache: _Cache) -> tuple[int, Path | None]:
    previous = spec.previous
    keyed = with_identity(placed, columns, spec.primary_key)
    # only the buckets the input's keys fall in can hold what the input is compared with
    touched = _buckets_in(keyed, previous.depth) if previous else set()
    added = cache.keep(changes(latest(keyed), _mirror(spark, spec, touched)))
    totals = added.agg(F.count(F.lit(1)).alias("rows"), F.sum(F.col(IS_NEW).cast("long")).alias("new")).first()
    rows_added, new_keys = int(totals["rows"]), int(totals["new"] or 0)
    if rows_added == 0:
        return 0, None
    numbered = cache.keep(number(added, spec.next_offset))
    write_slice(numbered, columns, spec.work)
    added.unpersist()  # numbered holds what is still needed
    depth = depth_for((previous.keys if previous else 0) + new_keys)
    depth = max(depth, previous.depth) if previous else depth
    # the same layout: rewrite the buckets rows were added to; a deeper one: rewrite every bucket
    rewritten = _buckets_in(numbered, depth) if previous and previous.depth == depth else None
    buckets = spec.work / "buckets"
    buckets.mkdir()
    written = write_buckets(entries(_mirror(spark, spec, rewritten), numbered, depth), buckets, depth)
    checkpoint = spec.work / "checkpoint"
    assemble(previous, spec.previous_dir, written, IngestState(spec.primary_key, depth), buckets, checkpoint)
    return rows_added, checkpoint


def _appended(spec: JobSpec, placed: Any, columns: Sequence[str]) -> Path:
    numbered = placed.withColumn(OFFSET_COLUMN, F.lit(spec.next_offset) + F.col(POSITION))
    write_slice(numbered, columns, spec.work)
    checkpoint = spec.work / "checkpoint"
    (spec.work / "sources").mkdir()
    assemble_sources(spec.previous_dir, list(spec.fingerprints), spec.work / "sources", checkpoint)
    return checkpoint


def run(spark: Any, spec: JobSpec) -> JobOutcome:
    """Run the job; raises IngestError for bad input. Spark's own exceptions propagate."""
    cache = _Cache()
    try:
        frame, fields = read_all(spark, spec)
        frame = cache.keep(frame)
        splits = cache.keep(split_table(frame))
        census = take_census(frame, splits, spec.inputs)
        placed = with_position(frame.drop(CORRUPT), splits)
        columns = [f.name for f in fields]
        if spec.primary_key:
            added, checkpoint = _keyed(spark, spec, placed, columns, cache)
        else:
            added, checkpoint = census.rows, _appended(spec, placed, columns)
        slice_file = spec.work / "slice.parquet" if added else None
        return JobOutcome(census.rows, added, fields, slice_file, checkpoint)
    finally:
        cache.release()
