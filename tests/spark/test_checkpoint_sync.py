"""Checkpoints move file by file: a small change rewrites only the buckets it touches, so a push after
it moves a few percent of the first push's bytes; pulls restore a database that opens and answers;
a round trip across two workspaces ends with equal heads and rows; a workspace pulled state-only (the
latest checkpoint, no slice) ingests on from that checkpoint and pushes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from smart_transfer.checkpoint.files import describe, open_checkpoint
from smart_transfer.checkpoint.slot import CheckpointSlot
from smart_transfer.client import SyncClient
from smart_transfer.ingest import ingest
from smart_transfer.ingest import state as ingest_state
from smart_transfer.ingest.state import load_state, lookup
from smart_transfer.model import AddData, Multihash, decode_block
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


def slice_paths(workspace: Workspace, name: str) -> list[Path]:
    """Where the local store keeps (or would keep) the data slice of every AddData block of the chain."""
    dataset = workspace.dataset(name)
    events = [decode_block(dataset.block_bytes(h)).event for h, _ in dataset.blocks_after(dataset.require_tip(), None)]
    return [
        workspace.local_store.path_of(f"{name}/data/{event.new_data.physical_hash}")
        for event in events
        if isinstance(event, AddData) and event.new_data is not None
    ]


def offsets_of(workspace: Workspace, name: str, ids: list[str]) -> dict[str, int | None]:
    """The offset the installed checkpoint maps each ``id`` to (None: a key it does not hold)."""
    db = open_checkpoint(CheckpointSlot(workspace.root, name).current, read_only=True)
    try:
        found = {key: lookup(db, f'{{"id":"{key}"}}') for key in ids}
    finally:
        db.close()
    return {key: value[0] if value else None for key, value in found.items()}


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


def test_a_state_only_pull_continues_a_real_keyed_ingest_and_pushes(
    spark: Any, server_factory: Callable[..., ServerProcess], dataset_name: str, tmp_path: Path
) -> None:
    """Issue 45 item 2 with the real pipeline (test_partial_pulls fakes the ingest with ``add`` and the
    checkpoint API): a ``pull(state_only=True)`` installs the chain and the latest checkpoint and no data
    slice, a keyed Spark ingest in that workspace continues from the checkpoint, and its push lands on the
    server so that a full pull elsewhere reads every row. Continuing is what the counts prove: B re-reads
    every current row, and only the changed one and the new one are added; an ingest that did not see the
    checkpoint would add all of them. The checkpoint after it holds one more key, not two: the changed
    row updated its key's offset."""
    url = f"{server_factory().url}/{dataset_name}"
    first_rows = [(str(i), f"n{i}", "1") for i in range(10)]
    second_rows = [("3", "changed-in-a", "2"), ("10", "n10", "1"), ("11", "n11", "1")]
    with Workspace(tmp_path / "a") as a:
        ingest(a, dataset_name, write_csv(tmp_path / "1.csv", first_rows), spark=spark, primary_key=["id"])
        second = ingest(a, dataset_name, write_csv(tmp_path / "2.csv", second_rows), spark=spark, primary_key=["id"])
        assert second.rows_added == 3  # offsets 10-12: one changed key, two new ones
        latest = describe(CheckpointSlot(a.root, dataset_name).current)
        with SyncClient(a) as client:
            assert client.push(dataset_name, url).blocks == 4  # Seed, SetDataSchema, two AddData

    with Workspace(tmp_path / "b") as b:
        with SyncClient(b) as client:
            state = client.pull(url, state_only=True)
        assert state.blocks == 4
        # the latest checkpoint's files and nothing else: no slice, no file of the first checkpoint
        assert state.objects_transferred == len({f.physical_hash for f in latest.files})
        slices = slice_paths(b, dataset_name)
        assert len(slices) == 2 and not any(path.exists() for path in slices)
        slot = CheckpointSlot(b.root, dataset_name)
        assert slot.current_hash() == Multihash.parse(second.checkpoint or "")
        assert load_state(slot.current).keys == 12

        # every current row again (unchanged), key 5 changed, key 12 new
        current = {key: (name, qty) for key, name, qty in first_rows + second_rows}
        current_rows = [(key, *value) for key, value in current.items()]
        changed = [(key, "changed-in-b", "3") if key == "5" else (key, name, qty) for key, name, qty in current_rows]
        third = ingest(
            b,
            dataset_name,
            write_csv(tmp_path / "3.csv", [*changed, ("12", "n12", "1")]),
            spark=spark,
            primary_key=["id"],
        )
        assert (third.rows_read, third.rows_added) == (13, 2)
        assert load_state(slot.current).keys == 13  # key 5 updated in place, key 12 added
        assert offsets_of(b, dataset_name, ["0", "3", "5", "12"]) == {"0": 0, "3": 10, "5": 13, "12": 14}
        b_checkpoint = slot.current_hash()
        with SyncClient(b) as client:
            pushed = client.push(dataset_name, url)
        assert pushed.blocks == 1
        # the new slice and the checkpoint's new pages and files; the slices B left out are not re-sent
        assert pushed.objects_transferred == 1 + third.checkpoint_pages_stored + third.checkpoint_files_stored

    with Workspace(tmp_path / "c") as c:
        with SyncClient(c) as client:
            full = client.pull(url)
        assert full.blocks == 5
        assert all(path.exists() for path in slice_paths(c, dataset_name))  # where B had none of them
        assert CheckpointSlot(c.root, dataset_name).current_hash() == b_checkpoint
        log = rows(c, dataset_name)
        assert [r["offset"] for r in log] == list(range(15))
        latest_by_key = {r["id"]: (r["name"], r["qty"]) for r in log}  # offset order: the last one wins
        assert latest_by_key == {**current, "5": ("changed-in-b", "3"), "12": ("n12", "1")}
        assert latest_by_key["3"] == ("changed-in-a", "2") and latest_by_key["0"] == ("n0", "1")
