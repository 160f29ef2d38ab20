"""Parquet data slices for tests that read data back, without Spark: files with an ``offset`` column
added to a workspace dataset with ``smart-transfer add`` (one AddData block each)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.conftest import run_cli


def slice_table(start: int, count: int, padding: int = 0) -> pa.Table:
    """Rows ``start..start+count-1``: offset, a name and an amount (and ``padding`` random bytes per
    row, to make slow transfers)."""
    columns: dict[str, pa.Array] = {
        "offset": pa.array(range(start, start + count), pa.int64()),
        "name": pa.array([f"row-{i}" for i in range(start, start + count)]),
        "amount": pa.array([i * 10 for i in range(start, start + count)], pa.int64()),
    }
    if padding:
        columns["padding"] = pa.array([os.urandom(padding) for _ in range(count)], pa.binary())
    return pa.table(columns)


def add_slices(
    workspace: Path,
    name: str,
    directory: Path,
    counts: list[int],
    *,
    start: int = 0,
    padding: int = 0,
    row_group_size: int | None = None,
) -> int:
    """Append one slice per entry of ``counts`` (that many rows each) to dataset ``name``, offsets
    continuing from ``start``; returns the next offset. One ``add`` of every file (a block each, in
    order, records from each Parquet footer), not a process per slice (60 slices took a minute); the
    blocks share one commit time, so a test of times between blocks adds them one command each."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for count in counts:
        path = directory / f"slice-{start}.parquet"
        pq.write_table(slice_table(start, count, padding), path, row_group_size=row_group_size)
        paths.append(str(path))
        start += count
    result = run_cli("add", name, *paths, workspace=workspace)
    assert result.returncode == 0, result.stderr
    assert f": added {len(counts)} block(s)" in result.stdout, result.stdout
    return start
