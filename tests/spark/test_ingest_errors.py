"""Bad input is one clear line naming the file (and record), and changes nothing: not the head, not
the stored objects, not the checkpoint. From the CLI: that line alone on stderr, exit 1, and no JVM
or Spark output unless --verbose."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from smart_transfer.ingest import IngestError, ingest
from smart_transfer.repo import Workspace
from smart_transfer.repo.index import lock_holder
from tests.conftest import CLI
from tests.spark.data import snapshot, write_csv, write_jsonl

CASES = [
    # (file name, content, primary key, expected fragment of the one line)
    ("missing.csv", None, [], "no such input: "),
    ("in.csv", "id,name\n1,a\n", ["nope"], "primary key column(s) nope not in the input (columns: id, name)"),
    ("in.csv", 'id,name,qty\n1,a,1\n2,"b\nc",2\n3,x,3,extra\n', [], "in.csv: record 3 is malformed: '3,x,3,extra'"),
    ("in.csv", "id,name,qty\n1,a\n", ["id"], "in.csv: record 1 is malformed: '1,a'"),
    ("in.jsonl", '{"id": "1", "name": "a", "qty": "1"}\n{"id": \n', [], "in.jsonl: record 2 is malformed: '{\"id\": '"),
    ("in.csv", "offset,x\n1,2\n", [], "already has a column named 'offset'"),
    ("in.txt", "a,b\n1,2\n", [], "cannot tell the format of"),
    ("empty.csv", "", [], "empty.csv: empty input"),
    ("empty.csv", "", ["id"], "empty.csv: empty input"),
    ("header.csv", "id,name,qty\n", [], "header.csv: empty input (no records)"),
    ("header.csv", "id,name,qty\n", ["id"], "header.csv: empty input (no records)"),
    ("empty.jsonl", "", ["id"], "empty.jsonl: empty input"),
    ("other.csv", "id,title\n1,a\n", [], "does not match the dataset's schema: missing column 'name'"),
    (
        "other.jsonl",
        '{"id": 1, "name": "a", "qty": "2"}\n',
        [],
        "the dataset's schema: column 'id' is BIGINT, not STRING",
    ),
    ("bad.parquet", "not parquet at all", [], "bad.parquet: "),
]


@pytest.mark.parametrize(("name", "content", "key", "fragment"), CASES)
def test_bad_input_is_one_clear_error_and_changes_nothing(
    spark: Any, tmp_path: Path, name: str, content: str | None, key: list[str], fragment: str
) -> None:
    with Workspace(tmp_path / "ws") as ws:
        if key != ["nope"]:
            ingest(ws, "ds", write_csv(tmp_path / "base.csv", [("9", "z", "9")]), spark=spark, primary_key=key)
        before = snapshot(ws, "ds")
        path = tmp_path / name
        if content is not None:
            path.write_text(content)
        with pytest.raises(IngestError) as raised:
            ingest(ws, "ds", path, spark=spark, primary_key=key)
        message = str(raised.value)
        assert fragment in message and "\n" not in message and len(message) < 400
        assert snapshot(ws, "ds") == before
        assert not list(ws.root.glob(".ingest-*"))  # no scratch left behind


def test_the_schema_of_a_dataset_is_kept(spark: Any, tmp_path: Path) -> None:
    as_json = write_jsonl(tmp_path / "a.jsonl", [{"id": 1, "name": "a"}])
    as_csv = write_csv(tmp_path / "b.csv", [("2", "b")], header=("id", "name"))
    as_parquet = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": pa.array([3], pa.int32()), "name": ["c"]}), as_parquet)
    with Workspace(tmp_path / "ws") as ws:
        ingest(ws, "ds", as_json, spark=spark)
        before = snapshot(ws, "ds")
        with pytest.raises(IngestError, match=r"b\.csv: does not match the dataset's schema: column 'id' is STRING"):
            ingest(ws, "ds", as_csv, spark=spark, schema="id STRING, name STRING")
        with pytest.raises(IngestError, match=r"c\.parquet: does not match the dataset's schema: column 'id' is INT"):
            ingest(ws, "ds", as_parquet, spark=spark)
        with pytest.raises(IngestError, match="--schema: not a Spark DDL schema"):
            ingest(ws, "ds", as_csv, spark=spark, schema="id INTEGR,")
        assert snapshot(ws, "ds") == before
        assert ingest(ws, "ds", as_csv, spark=spark).rows_added == 1  # CSV is read with the recorded types


def test_a_parquet_type_spark_cannot_read_is_named_with_its_file(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "nanos.parquet"
    pq.write_table(pa.table({"at": pa.array([0], pa.timestamp("ns"))}), path)
    with Workspace(tmp_path / "ws") as ws, pytest.raises(IngestError) as raised:
        ingest(ws, "ds", path, spark=spark)
    assert str(raised.value) == f"{path}: Illegal Parquet type: INT64 (TIMESTAMP(NANOS,false))."


def test_inputs_of_one_run_must_agree(spark: Any, tmp_path: Path) -> None:
    one = write_csv(tmp_path / "one.csv", [("1", "a")], header=("id", "name"))
    two = write_csv(tmp_path / "two.csv", [("1", "a")], header=("id", "title"))
    with (
        Workspace(tmp_path / "ws") as ws,
        pytest.raises(IngestError, match=r"two\.csv: does not match the first input"),
    ):
        ingest(ws, "ds", [one, two], spark=spark)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "ingest", *args], capture_output=True, text=True, check=False, timeout=300)


def test_cli_prints_one_line_and_no_spark_noise(tmp_path: Path) -> None:
    workspace = str(tmp_path / "ws")
    a = write_csv(tmp_path / "a.csv", [(str(i), f"n{i}", str(i * 3)) for i in range(50)])
    b = write_csv(tmp_path / "b.csv", [("50", "n50", "1")])
    ok = run_cli("ds", "--input", str(a), str(b), "--primary-key", "id", "--json", "--workspace", workspace)
    assert ok.returncode == 0, ok.stderr
    assert ok.stderr == ""
    summary = orjson.loads(ok.stdout)
    assert (summary["rows_read"], summary["rows_added"], summary["schema_recorded"]) == (51, 51, True)

    bad = write_csv(tmp_path / "bad.csv", [("1", "a", "1"), ("2", "b")])
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    for args, line in [
        (["--input", str(bad)], f"smart-transfer: error: {bad}: record 2 is malformed: '2,b'"),
        (["--input", str(empty), "--primary-key", "id"], f"smart-transfer: error: {empty}: empty input (no header"),
        (["--input", str(empty)], f"smart-transfer: error: {empty}: empty input (no header"),
    ]:
        failed = run_cli("other", *args, "--workspace", workspace)
        assert failed.returncode == 1
        assert failed.stdout == ""
        assert len(failed.stderr.splitlines()) == 1 and failed.stderr.startswith(line), failed.stderr


def test_cli_slices_are_identical_across_processes(tmp_path: Path) -> None:
    data = write_csv(tmp_path / "a.csv", [(str(i), f"n{i}", str(i * 3)) for i in range(50)])
    slices = []
    for name in ("one", "two"):
        result = run_cli(
            "ds", "--input", str(data), "--primary-key", "id", "--json", "--workspace", str(tmp_path / name)
        )
        assert result.returncode == 0, result.stderr
        slices.append(orjson.loads(result.stdout)["data_slice"])
    assert slices[0] == slices[1]


def _beside(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, check=False, timeout=60)


def test_log_and_list_run_while_an_ingest_holds_the_workspace(spark: Any, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    first = write_csv(tmp_path / "a.csv", [(str(i), f"n{i}", str(i)) for i in range(20)])
    # the dataset to read exists already: made in this process's shared session (a JVM start saved)
    assert ingest(workspace, "ds", first, spark=spark).rows_added == 20
    more = write_csv(tmp_path / "b.csv", [(str(i), f"m{i}", str(i)) for i in range(20, 40)])
    ingesting = subprocess.Popen(
        [*CLI, "ingest", "ds", "--input", str(more), "--json", "--workspace", str(workspace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while lock_holder(workspace / "index" / "LOCK") is None and ingesting.poll() is None:
            assert time.monotonic() < deadline, "the ingest never opened the workspace"
            time.sleep(0.05)
        held = lock_holder(workspace / "index" / "LOCK")
        logged = subprocess.run(
            [*CLI, "log", "ds", "--json", "--workspace", str(workspace)],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        listed = subprocess.run(
            [*CLI, "list", "--json", "--workspace", str(workspace)],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    finally:
        out, err = ingesting.communicate(timeout=300)
    assert held is not None and str(ingesting.pid) in held  # the readers ran while the ingest held it
    assert logged.returncode == 0 and len(logged.stdout.splitlines()) >= 2, logged.stderr
    assert listed.returncode == 0 and [d["name"] for d in orjson.loads(listed.stdout)] == ["ds"], listed.stderr
    assert ingesting.returncode == 0, err
    assert orjson.loads(out)["rows_added"] == 20
