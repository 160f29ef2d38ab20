"""Dedup by key and by input, decided in Spark: new and changed rows are added in input order, the
last occurrence of a key in a run wins, identical rows and inputs add nothing; the checkpoint is a
RocksDB database mapping key -> (offset, row hash) that a reader can open."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from smart_transfer.checkpoint.files import open_checkpoint
from smart_transfer.checkpoint.slot import CheckpointSlot
from smart_transfer.ingest import IngestError, ingest
from smart_transfer.ingest import state as ingest_state
from smart_transfer.ingest.state import load_state, lookup
from smart_transfer.repo import Workspace
from tests.spark.data import rows, write_csv, write_jsonl


def offsets_in_checkpoint(ws: Workspace, name: str, keys: list[str]) -> dict[str, int | None]:
    db = open_checkpoint(CheckpointSlot(ws.root, name).current, read_only=True)
    try:
        found = {key: lookup(db, key) for key in keys}
    finally:
        db.close()
    return {key: value[0] if value else None for key, value in found.items()}


def bucket_files(ws: Workspace, name: str) -> dict[int, tuple[str, str]]:
    """bucket -> (hash of its SST, hash of its mirror file) in the current checkpoint."""
    current = CheckpointSlot(ws.root, name).current
    state = load_state(current)

    def digest(file: str) -> str:
        return hashlib.sha256((current / file).read_bytes()).hexdigest()

    return {b: (digest(f.sst), digest(f.mirror)) for b, f in state.buckets.items()}


def test_new_and_changed_rows_are_added_in_input_order_identical_ones_skipped(spark: Any, tmp_path: Path) -> None:
    with Workspace(tmp_path / "ws") as ws:
        first = write_csv(tmp_path / "a.csv", [("3", "fig", "7"), ("1", "apple", "3"), ("2", "pear", "5")])
        assert ingest(ws, "fruit", first, spark=spark, primary_key=["id"]).rows_added == 3
        head = ws.dataset("fruit").require_tip().head
        again = ingest(ws, "fruit", first, spark=spark, primary_key=["id"])
        assert (again.rows_read, again.rows_added, again.head) == (3, 0, str(head))
        assert ws.dataset("fruit").require_tip().head == head
        second = write_csv(
            tmp_path / "b.csv", [("4", "kiwi", "1"), ("1", "apple", "3"), ("2", "pear", "6"), ("10", "lime", "2")]
        )
        assert ingest(ws, "fruit", second, spark=spark, primary_key=["id"]).rows_added == 3
        assert [(r["offset"], r["id"]) for r in rows(ws, "fruit")] == [
            (0, "3"),
            (1, "1"),
            (2, "2"),
            (3, "4"),  # input order, not key order ("10" < "2" < "4" as text)
            (4, "2"),
            (5, "10"),
        ]
        assert offsets_in_checkpoint(ws, "fruit", ['{"id":"2"}', '{"id":"3"}', '{"id":"9"}']) == {
            '{"id":"2"}': 4,
            '{"id":"3"}': 0,
            '{"id":"9"}': None,
        }


def test_the_last_occurrence_of_a_key_in_a_run_wins(spark: Any, tmp_path: Path) -> None:
    one = write_csv(tmp_path / "1.csv", [("1", "first", "1"), ("2", "only", "1"), ("1", "second", "1")])
    two = write_csv(tmp_path / "2.csv", [("3", "x", "1"), ("1", "third", "1")])
    with Workspace(tmp_path / "ws") as ws:
        result = ingest(ws, "dups", [one, two], spark=spark, primary_key=["id"])
        assert (result.rows_read, result.rows_added) == (5, 3)
        assert [(r["offset"], r["id"], r["name"]) for r in rows(ws, "dups")] == [
            (0, "2", "only"),
            (1, "3", "x"),
            (2, "1", "third"),  # numbered where its winning (last) occurrence stands
        ]


def test_composite_and_typed_keys(spark: Any, tmp_path: Path) -> None:
    table = pa.table(
        {
            "region": pa.array(["eu", "eu", "us", None]),
            "n": pa.array([1, 2, 1, 1], pa.int32()),
            "value": pa.array([1.5, 2.5, 3.5, 4.5]),
        }
    )
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    changed = tmp_path / "u.parquet"
    pq.write_table(pa.table({"region": ["eu", None], "n": pa.array([2, 1], pa.int32()), "value": [9.0, 4.5]}), changed)
    with Workspace(tmp_path / "ws") as ws:
        assert ingest(ws, "typed", path, spark=spark, primary_key=["region", "n"]).rows_added == 4
        assert ingest(ws, "typed", changed, spark=spark, primary_key=["region", "n"]).rows_added == 1  # null is a key
        assert offsets_in_checkpoint(ws, "typed", ['{"region":"eu","n":2}', '{"region":null,"n":1}']) == {
            '{"region":"eu","n":2}': 4,
            '{"region":null,"n":1}': 3,
        }


def test_json_ids_of_another_type_are_refused_not_silently_distinct(spark: Any, tmp_path: Path) -> None:
    numbers = write_jsonl(tmp_path / "a.jsonl", [{"id": 1, "v": "x"}])
    texts = write_jsonl(tmp_path / "b.jsonl", [{"id": "1", "v": "x"}])
    with Workspace(tmp_path / "ws") as ws:
        ingest(ws, "ids", numbers, spark=spark, primary_key=["id"])
        with pytest.raises(IngestError, match=r"b\.jsonl: does not match the dataset's schema: column 'id' is STRING"):
            ingest(ws, "ids", texts, spark=spark, primary_key=["id"])


def test_without_a_key_an_input_ingested_before_is_skipped(spark: Any, tmp_path: Path) -> None:
    data = write_csv(tmp_path / "a.csv", [("1", "a", "1"), ("1", "a", "1")])
    more = write_csv(tmp_path / "b.csv", [("2", "b", "2")])
    with Workspace(tmp_path / "ws") as ws:
        assert ingest(ws, "log", data, spark=spark).rows_added == 2  # no key: duplicates are kept
        head = ws.dataset("log").require_tip().head
        again = ingest(ws, "log", data, spark=spark)
        assert (again.rows_added, again.inputs_already_ingested, again.inputs) == (0, [str(data)], [])
        assert ws.dataset("log").require_tip().head == head
        both = ingest(ws, "log", [data, more], spark=spark)
        assert (both.rows_added, both.inputs_already_ingested) == (1, [str(data)])
        assert [r["offset"] for r in rows(ws, "log")] == [0, 1, 2]


def test_a_dataset_keeps_its_mode(spark: Any, tmp_path: Path) -> None:
    data = write_csv(tmp_path / "a.csv", [("1", "a", "1")])
    with Workspace(tmp_path / "ws") as ws:
        ingest(ws, "keyed", data, spark=spark, primary_key=["id"])
        with pytest.raises(IngestError, match="was ingested with primary key id"):
            ingest(ws, "keyed", data, spark=spark)
        with pytest.raises(IngestError, match="was ingested with primary key id"):
            ingest(ws, "keyed", data, spark=spark, primary_key=["name"])


def test_buckets_split_as_keys_grow_and_untouched_buckets_keep_their_files(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest_state, "TARGET_KEYS_PER_BUCKET", 8)
    with Workspace(tmp_path / "ws") as ws:
        ingest(
            ws,
            "b",
            write_csv(tmp_path / "1.csv", [(str(i), "x", "1") for i in range(30)]),
            spark=spark,
            primary_key=["id"],
        )
        first = bucket_files(ws, "b")
        assert load_state(CheckpointSlot(ws.root, "b").current).depth == 2  # 30 keys, 8 per bucket: 4 buckets
        ingest(ws, "b", write_csv(tmp_path / "2.csv", [("5", "changed", "1")]), spark=spark, primary_key=["id"])
        second = bucket_files(ws, "b")
        assert set(second) == set(first)
        changed = {b for b in second if second[b] != first[b]}
        assert len(changed) == 1  # one key changed: one bucket rewritten (SST and mirror), the others shared
        assert all(second[b][0] != first[b][0] and second[b][1] != first[b][1] for b in changed)
        ingest(
            ws,
            "b",
            write_csv(tmp_path / "3.csv", [(str(i), "y", "1") for i in range(100, 140)]),
            spark=spark,
            primary_key=["id"],
        )
        third = load_state(CheckpointSlot(ws.root, "b").current)
        assert (third.depth, third.keys) == (4, 70)
        looked_up = offsets_in_checkpoint(ws, "b", [f'{{"id":"{i}"}}' for i in (0, 5, 29, 139)])
        assert looked_up == {'{"id":"0"}': 0, '{"id":"5"}': 30, '{"id":"29"}': 29, '{"id":"139"}': 70}
