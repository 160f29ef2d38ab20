"""Deterministic Parquet bytes. Spark's writer (parquet-mr) lists each column chunk's encodings from
a Java HashSet of enums, whose order follows identity hash codes and so changes between JVM runs:
the same rows give different bytes, and a content-addressed slice would get a new name each time.
Re-writing the file with pyarrow (same schema and Spark's schema metadata, one row group at a time)
gives the same bytes for the same rows on every run."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

#: Rows per row group of the normalized file.
ROW_GROUP_ROWS = 1_000_000


def normalize(source: Path, destination: Path) -> None:
    """Write ``source``'s rows to ``destination`` deterministically (snappy, no statistics drift)."""
    reader = pq.ParquetFile(source)
    schema = reader.schema_arrow
    with pq.ParquetWriter(
        destination, schema, compression="snappy", version="2.6", write_statistics=True, use_dictionary=True
    ) as writer:
        for index in range(reader.num_row_groups):
            writer.write_table(reader.read_row_group(index), row_group_size=ROW_GROUP_ROWS)
