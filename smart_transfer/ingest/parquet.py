"""Deterministic Parquet bytes. Spark's writer (parquet-mr) lists each column chunk's encodings from
a Java HashSet of enums, whose order follows identity hash codes and so changes between JVM runs:
the same rows give different bytes, and a content-addressed slice would get a new name each time.
Re-writing the file with pyarrow (in batches of a fixed number of rows) gives the same bytes for the
same rows on every run, in bounded driver memory. The rewrite also makes every column but the
``offset`` nullable, whatever Spark concluded from one input (CSV text is never null, say), so all
slices of a dataset have one schema; Spark's private schema copy is dropped for the same reason."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from smart_transfer.model.events import OFFSET_COLUMN

#: Rows per row group of a data slice; the driver holds one such batch at a time while rewriting.
ROW_GROUP_ROWS = 131_072


def normalize(source: Path, destination: Path, required: tuple[str, ...] = (OFFSET_COLUMN,)) -> None:
    """Write ``source``'s rows to ``destination`` deterministically (snappy, statistics, dictionaries),
    in row groups of exactly ROW_GROUP_ROWS rows whatever ``source``'s were; only the ``required``
    columns are marked not null. Reads one of ``source``'s row groups at a time (pyarrow's batch
    reader over a whole file holds on to memory as it goes)."""
    reader = pq.ParquetFile(source)
    schema = pa.schema([f.with_nullable(f.name not in required) for f in reader.schema_arrow])
    with pq.ParquetWriter(
        destination,
        schema,
        compression="snappy",
        version="2.6",
        write_statistics=True,
        use_dictionary=True,
    ) as writer:
        pending = schema.empty_table()
        for index in range(reader.num_row_groups):
            group = reader.read_row_group(index)
            pending = pa.concat_tables([pending, pa.Table.from_arrays(group.columns, schema=schema)])
            while pending.num_rows >= ROW_GROUP_ROWS:
                # contiguous columns: page boundaries then depend on the rows, not on Spark's row groups
                chunk = pending.slice(0, ROW_GROUP_ROWS).combine_chunks()
                writer.write_table(chunk, row_group_size=ROW_GROUP_ROWS)
                pending = pending.slice(ROW_GROUP_ROWS)
            del group
            pa.default_memory_pool().release_unused()  # keep the driver's footprint at one row group
        if pending.num_rows:
            writer.write_table(pending.combine_chunks(), row_group_size=ROW_GROUP_ROWS)
