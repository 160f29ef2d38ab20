"""Ingest with Spark: formats, offsets, dedup by key and by file, empty and bad input."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from smart_transfer.checkpoint.files import open_checkpoint
from smart_transfer.checkpoint.slot import CheckpointSlot
from smart_transfer.ingest.job import IngestError, ingest
from smart_transfer.repo import Workspace
from tests.conftest import CLI


def rows_of(workspace: Workspace, name: str, spark: Any) -> list[tuple[Any, ...]]:
    """Every row of every slice, in offset order."""
    directory = workspace.root / "store" / name / "data"
    frame = spark.read.parquet(*[str(p) for p in sorted(directory.iterdir())])
    return sorted(tuple(r) for r in frame.collect())


def write_csv(path: Path, rows: list[tuple[str, ...]], header: str = "id,name,qty") -> Path:
    path.write_text(header + "\n" + "".join(",".join(r) + "\n" for r in rows))
    return path


def test_csv_json_and_parquet_inputs_become_offset_slices(spark: Any, tmp_path: Path) -> None:
    with Workspace(tmp_path / "ws") as ws:
        csv = write_csv(tmp_path / "in.csv", [("1", "apple", "3"), ("2", "pear", "5")])
        first = ingest(ws, "csv", csv, spark=spark)
        assert (first.rows_read, first.rows_added) == (2, 2)
        assert rows_of(ws, "csv", spark) == [(0, "1", "apple", "3"), (1, "2", "pear", "5")]
        jsonl = tmp_path / "in.jsonl"
        jsonl.write_text("\n".join(json.dumps({"id": i, "v": f"x{i}"}) for i in range(3)) + "\n")
        assert ingest(ws, "json", jsonl, spark=spark).rows_added == 3
        assert [r[0] for r in rows_of(ws, "json", spark)] == [0, 1, 2]
        parquet = tmp_path / "in.parquet"
        pq.write_table(pa.table({"k": [10, 20, 30, 40], "v": ["a", "b", "c", "d"]}), parquet)
        assert ingest(ws, "pq", parquet, spark=spark).rows_added == 4
        more = tmp_path / "more.parquet"
        pq.write_table(pa.table({"k": [50], "v": ["e"]}), more)
        ingest(ws, "pq", more, spark=spark)
        assert [r[0] for r in rows_of(ws, "pq", spark)] == [0, 1, 2, 3, 4]  # offsets continue
        tip = ws.dataset("pq").require_tip()
        assert (tip.sequence_number, tip.next_offset) == (2, 5)
        # no Spark leftovers (_SUCCESS, .crc, part files) anywhere in the workspace
        leftovers = [
            p.name for p in ws.root.rglob("*") if p.name.startswith(("_SUCCESS", "part-")) or p.name.endswith(".crc")
        ]
        assert leftovers == []


def test_primary_key_skips_identical_rows_and_appends_changed_ones(spark: Any, tmp_path: Path) -> None:
    with Workspace(tmp_path / "ws") as ws:
        first = write_csv(tmp_path / "a.csv", [("1", "apple", "3"), ("2", "pear", "5"), ("3", "fig", "7")])
        assert ingest(ws, "fruit", first, spark=spark, primary_key=["id"]).rows_added == 3
        again = ingest(ws, "fruit", first, spark=spark, primary_key=["id"])
        assert (again.rows_read, again.rows_added, again.head) == (3, 0, str(ws.dataset("fruit").require_tip().head))
        second = write_csv(tmp_path / "b.csv", [("1", "apple", "3"), ("2", "pear", "6"), ("4", "kiwi", "1")])
        changed = ingest(ws, "fruit", second, spark=spark, primary_key=["id"])
        assert changed.rows_added == 2
        assert rows_of(ws, "fruit", spark)[3:] == [(3, "2", "pear", "6"), (4, "4", "kiwi", "1")]
        # the checkpoint is a RocksDB database mapping key -> (offset, row hash)
        state = open_checkpoint(CheckpointSlot(ws.root, "fruit").current, read_only=True)
        try:
            assert orjson.loads(state[b'key:{"id":"2"}'])["offset"] == 3
            assert orjson.loads(state[b'key:{"id":"3"}'])["offset"] == 2
        finally:
            state.close()


def test_without_a_key_the_same_file_is_a_no_op(spark: Any, tmp_path: Path) -> None:
    with Workspace(tmp_path / "ws") as ws:
        data = write_csv(tmp_path / "a.csv", [("1", "a", "1"), ("1", "a", "1")])
        assert ingest(ws, "log", data, spark=spark).rows_added == 2  # duplicates kept: no key, no identity
        head = ws.dataset("log").require_tip().head
        assert ingest(ws, "log", data, spark=spark).rows_added == 0
        assert ws.dataset("log").require_tip().head == head


def test_empty_input_adds_no_slice(spark: Any, tmp_path: Path) -> None:
    with Workspace(tmp_path / "ws") as ws:
        empty = write_csv(tmp_path / "empty.csv", [])
        result = ingest(ws, "nothing", empty, spark=spark, primary_key=["id"])
        assert (result.rows_added, result.data_slice) == (0, None)
        assert ws.dataset("nothing").tip() is None


@pytest.mark.parametrize(
    ("content", "name", "key", "fragment"),
    [
        (None, "missing.csv", [], "no such input"),
        ("id,name\n1,a\n", "in.csv", ["nope"], "primary key column(s) nope not in the input"),
        ("id,name\n1,a\n2,b,c,d\n", "in.csv", [], "malformed input"),
        ('{"id": 1}\n{"id": \n', "in.json", [], "malformed input"),
        ("offset,x\n1,2\n", "in.csv", [], "already has a column named 'offset'"),
        ("a,b\n1,2\n", "in.txt", [], "cannot tell the format"),
    ],
)
def test_bad_input_is_one_clear_error_and_changes_nothing(
    spark: Any, tmp_path: Path, content: str | None, name: str, key: list[str], fragment: str
) -> None:
    with Workspace(tmp_path / "ws") as ws:
        base = write_csv(tmp_path / "base.csv", [("9", "z", "9")])
        ingest(ws, "ds", base, spark=spark)
        before = ws.dataset("ds").require_tip()
        objects_before = sorted(p.name for p in (ws.root / "store").rglob("*") if p.is_file())
        path = tmp_path / name
        if content is not None:
            path.write_text(content)
        with pytest.raises(IngestError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
            ingest(ws, "ds", path, spark=spark, primary_key=key)
        assert ws.dataset("ds").require_tip() == before
        assert sorted(p.name for p in (ws.root / "store").rglob("*") if p.is_file()) == objects_before
        assert CheckpointSlot(ws.root, "ds").current.exists()


def test_cli_ingest_is_deterministic_across_processes(tmp_path: Path) -> None:
    data = write_csv(tmp_path / "a.csv", [(str(i), f"n{i}", str(i * 3)) for i in range(50)])
    slices = []
    for name in ("one", "two"):
        result = subprocess.run(
            [
                *CLI,
                "ingest",
                "ds",
                "--input",
                str(data),
                "--primary-key",
                "id",
                "--json",
                "--workspace",
                str(tmp_path / name),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        slices.append(orjson.loads(result.stdout)["data_slice"])
    assert slices[0] == slices[1]
    bad = subprocess.run(
        [*CLI, "ingest", "ds", "--input", str(data), "--primary-key", "missing", "--workspace", str(tmp_path / "one")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines()[-1].startswith("smart-transfer: error: primary key column(s) missing")
    assert "Traceback" not in bad.stderr
