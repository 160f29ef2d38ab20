"""Rows in input order, numbered in Spark. A row's place is (input, file, split of the file, row in the
split): Spark reads each split of a file in order, so within a split the row ids it hands out grow
with the row. Counting rows per split (a table with one line per split, not per row) gives each split
its first position, and every row its position in the whole run, with no row leaving the executors.
The same table finds the first malformed record and tells empty inputs apart."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Window
from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention

from smart_transfer.ingest.errors import IngestError, display_path, quoted
from smart_transfer.ingest.inputs import Input
from smart_transfer.ingest.sources import CORRUPT, FILE, INPUT, ROW, SEGMENT
from smart_transfer.model.events import OFFSET_COLUMN

POSITION = "__st_position"
_GROUP, _GROUP_BASE = "__st_group", "__st_group_base"
#: Rows kept by a job are numbered in groups of 2**NUMBERING_GROUP_BITS consecutive input positions:
#: one task sorts one group, so numbering is spread over the cluster and each sort is bounded.
NUMBERING_GROUP_BITS = 17


@dataclass(frozen=True, slots=True)
class Census:
    """How many records each input has (all of them parsed)."""

    rows_per_input: dict[int, int]

    @property
    def rows(self) -> int:
        return sum(self.rows_per_input.values())


def split_table(frame: Any) -> Any:
    """One line per split read: its rows, its first row id, its first malformed row (if any), and the
    rows before it in the whole run (``base``) and in its own file (``file_base``)."""
    table = frame.groupBy(*SEGMENT).agg(
        F.count(F.lit(1)).alias("rows"),
        F.min(ROW).alias("first_row"),
        F.min(F.when(F.col(CORRUPT).isNotNull(), F.col(ROW))).alias("first_bad"),
    )
    before = Window.orderBy(*SEGMENT).rowsBetween(Window.unboundedPreceding, -1)
    table = table.withColumn("base", F.coalesce(F.sum("rows").over(before), F.lit(0)))
    return table.withColumn("file_base", F.col("base") - F.min("base").over(Window.partitionBy(INPUT, FILE)))


def take_census(frame: Any, splits: Any, inputs: Sequence[Input]) -> Census:
    """Count records per input; an empty input or a malformed record is an IngestError naming it.
    One line per split reaches the driver (a few per file), never a row."""
    table = splits.orderBy(*SEGMENT).collect()
    counts: dict[int, int] = {}
    for split in table:
        counts[split[INPUT]] = counts.get(split[INPUT], 0) + split["rows"]
    for item in inputs:
        if not counts.get(item.index):
            raise IngestError(f"{item.path}: empty input (no records)")
    bad = next((split for split in table if split["first_bad"] is not None), None)
    if bad is not None:
        located = (F.col(INPUT) == bad[INPUT]) & (F.col(FILE) == bad[FILE]) & (F.col(ROW) == bad["first_bad"])
        text = frame.filter(located).select(CORRUPT).first()[0]
        record = bad["file_base"] + bad["first_bad"] - bad["first_row"] + 1
        raise IngestError(f"{display_path(bad[FILE])}: record {record} is malformed: {quoted(text)}")
    return Census(counts)


def with_position(frame: Any, splits: Any) -> Any:
    """``frame`` plus each row's position in the whole run (0, 1, 2, ... in input order)."""
    starts = F.broadcast(splits.select(*SEGMENT, "base", "first_row"))
    placed = frame.join(starts, list(SEGMENT))
    return placed.withColumn(POSITION, F.col("base") + F.col(ROW) - F.col("first_row")).drop("base", "first_row")


def number(frame: Any, start: int) -> Any:
    """``frame`` (a subset of a run's rows) plus ``offset``: start, start + 1, ... in position order."""
    grouped = frame.withColumn(_GROUP, F.shiftright(F.col(POSITION), NUMBERING_GROUP_BITS))
    counts = grouped.groupBy(_GROUP).count()
    before = Window.orderBy(_GROUP).rowsBetween(Window.unboundedPreceding, -1)
    bases = counts.select(_GROUP, F.coalesce(F.sum("count").over(before), F.lit(0)).alias(_GROUP_BASE))
    rank = F.row_number().over(Window.partitionBy(_GROUP).orderBy(POSITION))
    numbered = grouped.join(F.broadcast(bases), _GROUP)
    offset = F.lit(start) + F.col(_GROUP_BASE) + rank - F.lit(1)
    return numbered.withColumn(OFFSET_COLUMN, offset.cast("long")).drop(_GROUP, _GROUP_BASE)
