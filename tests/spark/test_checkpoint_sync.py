"""Checkpoints move file by file: a small change rewrites only the buckets it touches, so a push after
it moves a few percent of the first push's bytes; pulls restore a database that opens and answers;
a round trip across two workspaces ends with equal heads and rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from smart_transfer.checkpoint.files import describe, open_checkpoint
from smart_transfer.checkpoint.slot import CheckpointSlot
from smart_transfer.client import SyncClient
from smart_transfer.ingest import ingest
from smart_transfer.ingest import state as ingest_state
from smart_transfer.ingest.state import load_state, lookup
from smart_transfer.model import Multihash
from smart_transfer.model.manifest import CheckpointManifest, decode_manifest
from smart_transfer.repo import Workspace
from tests.conftest import ServerProcess
from tests.spark.data import rows, write_csv

#: Rows of the dataset the sync test changes by 10 rows. Buckets are made smaller than the default
#: (2048 keys) so that this smaller dataset has as many buckets as a 1M-row one has by default.
SYNC_ROWS = 100_000
SYNC_BUCKET_KEYS = 256


def files_in(workspace: Workspace, name: str) -> int:
    return len(list(CheckpointSlot(workspace.root, name).current.iterdir()))


def manifest_change(workspace: Workspace, name: str, before: str | None, after: str | None) -> tuple[int, int]:
    """Bytes of the manifest pages ``after`` does not share with ``before``, and of its format-1 form."""
    dataset = workspace.dataset(name)
    old, new = (
        decode_manifest(dataset.page_source(Multihash.parse(h or "")) or b"", dataset.page_source)
        for h in (before, after)
    )
    held = {page for page, _ in old.all_pages()}
    added = sum(len(data) for page, data in new.all_pages() if page not in held)
    return added, len(CheckpointManifest(new.files).encode())


def pages_in(workspace: Workspace, name: str) -> int:
    """The manifest objects (root and pages) of the installed checkpoint."""
    return len(describe(CheckpointSlot(workspace.root, name).current).all_pages())


def test_a_ten_row_change_pushes_a_few_percent_and_pulls_restore(
    spark: Any, smart_server: ServerProcess, dataset_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest_state, "TARGET_KEYS_PER_BUCKET", SYNC_BUCKET_KEYS)
    url = f"{smart_server.url}/{dataset_name}"
    data = [(str(i), f"customer-{i % 997}", str(i * 37 % 10_000)) for i in range(SYNC_ROWS)]
    with Workspace(tmp_path / "a") as a, Workspace(tmp_path / "b") as b:
        first = ingest(a, dataset_name, write_csv(tmp_path / "1.csv", data), spark=spark, primary_key=["id"])
        assert load_state(CheckpointSlot(a.root, dataset_name).current).depth == 9  # 512 buckets
        with SyncClient(a) as client:
            pushed = client.push(dataset_name, url)
        # the slice, the manifest's pages (root included) and the files
        assert pushed.objects_transferred == 1 + first.checkpoint_pages_stored + first.checkpoint_files_stored

        changed = [(str(i), "changed", "0") for i in range(0, SYNC_ROWS, SYNC_ROWS // 10)]  # 10 rows all over
        second = ingest(
            a, dataset_name, write_csv(tmp_path / "2.csv", data[:5] + changed), spark=spark, primary_key=["id"]
        )
        assert second.rows_added == 10
        with SyncClient(a) as client:
            incremental = client.push(dataset_name, url)
        # only the new slice, the new manifest pages and the rewritten buckets' files moved
        assert incremental.objects_transferred == 1 + second.checkpoint_pages_stored + second.checkpoint_files_stored
        unchanged = files_in(a, dataset_name) - second.checkpoint_files_stored
        # offered and skipped: the files and pages around the change (under the manifest pages the server
        # lacks), not every unchanged file of the state: ~10 changed leaf pages of ~9 entries and their
        # neighbours, about a quarter of a 1,000-file state (a 20,000-file one: test_checkpoint_pages)
        assert 0 < incremental.objects_skipped < (unchanged + pages_in(a, dataset_name)) // 3
        assert second.checkpoint_files_stored <= 2 * 10 + 8  # <= 10 buckets x 2 files, + RocksDB's small files
        assert incremental.bytes_transferred < 0.05 * pushed.bytes_transferred
        new_bytes, whole = manifest_change(a, dataset_name, first.checkpoint, second.checkpoint)
        files = files_in(a, dataset_name)
        print(f"\n10 rows changed, {files} files: new manifest pages {new_bytes} bytes, format 1 {whole}")
        assert new_bytes < whole // 2

        with SyncClient(b) as client:
            fresh = client.pull(url)
        assert fresh.blocks == 4  # Seed, SetDataSchema, two AddData
        restored = open_checkpoint(CheckpointSlot(b.root, dataset_name).current, read_only=True)
        try:
            assert lookup(restored, '{"id":"10000"}') is not None
            assert lookup(restored, '{"id":"10000"}')[0] == SYNC_ROWS + 1  # type: ignore[index]
            assert lookup(restored, '{"id":"99999"}')[0] == 99_999  # type: ignore[index]
        finally:
            restored.close()

        third = ingest(
            a, dataset_name, write_csv(tmp_path / "3.csv", [("new", "n", "1")]), spark=spark, primary_key=["id"]
        )
        with SyncClient(a) as client:
            client.push(dataset_name, url)
        with SyncClient(b) as client:
            again = client.pull(url)
        # the pull is incremental too
        assert again.objects_transferred == 1 + third.checkpoint_files_stored  # the pages came in the metadata


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
        assert rows(a, dataset_name) == rows(b, dataset_name)
        assert len(rows(a, dataset_name)) == 102
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
            assert lookup(db, '{"id":"1"}') == lookup(db, b'{"id":"1"}') is not None
        finally:
            db.close()
