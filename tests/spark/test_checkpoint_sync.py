"""Checkpoints move file by file: shared SST files once, then only what changed; pulls restore a
database that opens and answers; a round trip across two workspaces ends with equal heads and rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from smart_transfer.checkpoint.files import open_checkpoint
from smart_transfer.checkpoint.slot import CheckpointSlot
from smart_transfer.client import SyncClient
from smart_transfer.ingest.job import ingest
from smart_transfer.repo import Workspace
from tests.conftest import ServerProcess
from tests.spark.test_ingest import rows_of, write_csv


def manifest_files(workspace: Workspace, name: str) -> int:
    current = CheckpointSlot(workspace.root, name).current
    return len(list(current.iterdir()))


def test_checkpoints_sync_incrementally_and_restore(
    spark: Any, smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    rows = [(str(i), f"name-{i}", str(i % 7)) for i in range(2000)]
    with Workspace(tmp_path / "a") as a, Workspace(tmp_path / "b") as b:
        first = ingest(a, dataset_name, write_csv(tmp_path / "1.csv", rows), spark=spark, primary_key=["id"])
        with SyncClient(a) as client:
            pushed = client.push(dataset_name, url)
        assert pushed.objects_transferred == 2 + first.checkpoint_files_stored  # slice + manifest + files

        changed = rows[:10] + [(str(i), f"changed-{i}", "0") for i in range(5)]  # 5 changed rows, 10 same
        second = ingest(a, dataset_name, write_csv(tmp_path / "2.csv", changed), spark=spark, primary_key=["id"])
        assert second.rows_added == 5
        files_now = manifest_files(a, dataset_name)
        with SyncClient(a) as client:
            incremental = client.push(dataset_name, url)
        # only the new slice, the new manifest and the checkpoint files that changed moved
        assert incremental.objects_transferred == 2 + second.checkpoint_files_stored
        assert incremental.objects_skipped == files_now - second.checkpoint_files_stored  # shared SSTs, not resent
        assert second.checkpoint_files_stored < files_now
        assert incremental.bytes_transferred < pushed.bytes_transferred / 4

        with SyncClient(b) as client:
            fresh = client.pull(url)
        assert fresh.blocks == 3  # Seed + two ingests
        restored = open_checkpoint(CheckpointSlot(b.root, dataset_name).current, read_only=True)
        try:
            assert orjson.loads(restored[b'key:{"id":"3"}'])["offset"] == 2003  # its new version (ids 0-4 -> 2000-2004)
            # first ingest: offsets follow key order (keys compare as JSON text)
            rank = sorted(f'{{"id":"{i}"}}' for i in range(2000)).index('{"id":"1999"}')
            assert orjson.loads(restored[b'key:{"id":"1999"}'])["offset"] == rank
        finally:
            restored.close()

        third = ingest(
            a, dataset_name, write_csv(tmp_path / "3.csv", [("9999", "new", "1")]), spark=spark, primary_key=["id"]
        )
        with SyncClient(a) as client:
            client.push(dataset_name, url)
        with SyncClient(b) as client:
            again = client.pull(url)
        assert again.objects_transferred == 2 + third.checkpoint_files_stored  # the pull is incremental too


def test_round_trip_across_two_workspaces(
    spark: Any, smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    with Workspace(tmp_path / "a") as a, Workspace(tmp_path / "b") as b:
        base = write_csv(tmp_path / "base.csv", [(str(i), f"n{i}", "1") for i in range(100)])
        ingest(a, dataset_name, base, spark=spark, primary_key=["id"])
        with SyncClient(a) as client:
            client.push(dataset_name, url)
        with SyncClient(b) as client:
            client.pull(url)
        # B dedups against the restored checkpoint: the same rows add nothing, new ones append
        assert ingest(b, dataset_name, base, spark=spark, primary_key=["id"]).rows_added == 0
        more = write_csv(tmp_path / "more.csv", [("5", "n5", "1"), ("100", "n100", "2"), ("7", "changed", "3")])
        assert ingest(b, dataset_name, more, spark=spark, primary_key=["id"]).rows_added == 2
        with SyncClient(b) as client:
            client.push(dataset_name, url)
        with SyncClient(a) as client:
            pulled = client.pull(url)
        assert pulled.blocks == 1
        assert a.dataset(dataset_name).require_tip() == b.dataset(dataset_name).require_tip()
        assert rows_of(a, dataset_name, spark) == rows_of(b, dataset_name, spark)
        assert len(rows_of(a, dataset_name, spark)) == 102
        assert (
            CheckpointSlot(a.root, dataset_name).current_hash() == CheckpointSlot(b.root, dataset_name).current_hash()
        )


@pytest.mark.parametrize("protocol", ["simple"])
def test_checkpoints_travel_over_the_simple_protocol_too(
    spark: Any, smart_server: ServerProcess, dataset_name: str, tmp_path: Path, protocol: str
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    with Workspace(tmp_path / "a") as a, Workspace(tmp_path / "b") as b:
        ingest(a, dataset_name, write_csv(tmp_path / "x.csv", [("1", "a", "1")]), spark=spark, primary_key=["id"])
        with SyncClient(a, protocol=protocol) as client:
            client.push(dataset_name, url)
        with SyncClient(b, protocol=protocol) as client:
            client.pull(url)
        assert (
            CheckpointSlot(b.root, dataset_name).current_hash() == CheckpointSlot(a.root, dataset_name).current_hash()
        )
        db = open_checkpoint(CheckpointSlot(b.root, dataset_name).current, read_only=True)
        try:
            assert db.get(b'key:{"id":"1"}') is not None
        finally:
            db.close()
