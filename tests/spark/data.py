"""Helpers for the Spark tests: inputs written the way their own tools write them, and slices read
back with pyarrow (not Spark), so a test compares what a reader of the dataset would get."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from smart_transfer.checkpoint.slot import CheckpointSlot
from smart_transfer.model import AddData
from smart_transfer.repo import Workspace


def write_csv(path: Path, rows: Iterable[Sequence[object]], header: Sequence[str] = ("id", "name", "qty")) -> Path:
    """A CSV file as Python's csv module writes it (RFC 4180 quoting)."""
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def slice_tables(workspace: Workspace, name: str) -> list[pa.Table]:
    """Every data slice of the dataset, oldest first (by the chain, not by file name)."""
    dataset = workspace.dataset(name)
    tip = dataset.require_tip()
    tables = []
    for block_hash, _ in dataset.blocks_after(tip, None):
        from smart_transfer.model import decode_block

        event = decode_block(dataset.block_bytes(block_hash)).event
        if isinstance(event, AddData) and event.new_data is not None:
            key = f"{name}/data/{event.new_data.physical_hash}"
            tables.append(pq.read_table(workspace.local_store.path_of(key)))
    return tables


def dataset_table(workspace: Workspace, name: str) -> pa.Table:
    """All slices as one table, in offset order."""
    return pa.concat_tables(slice_tables(workspace, name))


def rows(workspace: Workspace, name: str) -> list[dict[str, Any]]:
    return dataset_table(workspace, name).to_pylist()


def store_files(workspace: Workspace) -> list[str]:
    return sorted(str(p.relative_to(workspace.root)) for p in (workspace.root / "store").rglob("*") if p.is_file())


def snapshot(workspace: Workspace, name: str) -> tuple[object, list[str], object]:
    """What must not change after a failed ingest: head, stored objects, the checkpoint in place."""
    tip = workspace.dataset(name).tip()
    return tip, store_files(workspace), CheckpointSlot(workspace.root, name).current_hash()
