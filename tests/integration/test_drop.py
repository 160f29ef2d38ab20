"""``drop`` and a bounded follower, on both stores: a drop deletes local files outside the range it keeps
(or older checkpoints' files), records the narrower choice first, never deletes what a later push needs
(the objects of blocks after the remote head), and leaves ``verify`` clean and ``status`` partial; a
wider pull fetches the files again; bad input (exit 2, one line) and a workspace held by another writer
change nothing. ``pull --follow --last N`` drops what falls out of the range after each update, so a
follower's disk stays bounded while a pusher appends."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from smart_transfer.checkpoint.slot import CheckpointSlot
from smart_transfer.client import SyncClient, open_dataset
from smart_transfer.client.inspection.holdings import holdings
from smart_transfer.model.selection import Selection, SliceRange
from smart_transfer.repo import Workspace
from smart_transfer.storage import StorageUnavailable
from smart_transfer.storage.local import LocalStore
from tests.conftest import ServerProcess, run_cli, summary
from tests.integration.test_follow import Follower
from tests.integration.test_partial_checkpoints import _checkpoints, _files, _pushed
from tests.integration.test_read import one_line_error, tail
from tests.slices import add_slices

COUNTS = [100, 100, 100, 100, 100]
LAST_100 = Selection(slices=(SliceRange(records=100),))


def _pulled(server: ServerProcess, name: str, tmp_path: Path) -> tuple[Path, Path, str]:
    """Workspaces ``a`` (COUNTS pushed) and ``b`` (a plain pull of it) and the dataset URL."""
    a, b = tmp_path / "a", tmp_path / "b"
    url = f"{server.url}/{name}"
    add_slices(a, name, tmp_path / "in", COUNTS)
    summary(run_cli("push", name, url, "--json", workspace=a))
    summary(run_cli("pull", url, "--json", workspace=b))
    return a, b, url


def _objects(workspace: Path) -> list[Path]:
    """The data slice files of the workspace's store."""
    return sorted(p for p in (workspace / "store").glob("*/data/*") if p.is_file())


def _slices_missing(workspace: Path, name: str) -> int:
    with open_dataset(workspace, name) as dataset:
        refs = [entry.ref for entry in dataset.slices()]
        return len(dataset.workspace.dataset(name).objects_missing(refs))


def _verified(workspace: Path, name: str) -> int:
    """``verify`` passes; the number of objects absent by choice."""
    result = run_cli("verify", name, "--json", workspace=workspace)
    assert result.returncode == 0, result.stdout + result.stderr
    report = orjson.loads(result.stdout)
    assert report["ok"] and not report["problems"]
    return int(report["absent_objects"])


def test_a_drop_keeps_a_range_verify_stays_clean_and_a_wider_pull_fetches_again(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    _, b, _ = _pulled(smart_server, dataset_name, tmp_path)
    files = _objects(b)
    sizes = sorted(p.stat().st_size for p in files)
    dry = summary(run_cli("drop", dataset_name, "--last", "100", "--dry-run", "--json", workspace=b))
    assert (dry["objects"], dry["bytes"], dry["dry_run"]) == (4, sum(sizes) - _newest_size(b, dataset_name), True)
    assert _objects(b) == files  # a dry run changes nothing
    with Workspace(b, read_only=True) as opened:
        assert opened.selections.get(dataset_name) == Selection()

    dropped = summary(run_cli("drop", dataset_name, "--last", "100", "--json", workspace=b))
    assert (dropped["objects"], dropped["bytes"]) == (dry["objects"], dry["bytes"])
    assert _slices_missing(b, dataset_name) == 4 and len(_objects(b)) == len(files) - 4
    with Workspace(b, read_only=True) as opened:
        assert opened.selections.get(dataset_name) == LAST_100
        partial = holdings(opened, dataset_name)
    assert partial is not None and (partial.absent_objects, partial.absent_bytes) == (4, dry["bytes"])
    assert _verified(b, dataset_name) == 4
    assert [r["offset"] for r in tail(b, dataset_name, "-n", "2")] == [498, 499]
    one_line_error(run_cli("tail", dataset_name, "-n", "101", workspace=b), 2, "block 4 (offsets 300-399)")
    again = summary(run_cli("drop", dataset_name, "--last", "100", "--json", workspace=b))
    assert again["objects"] == 0  # nothing left to drop

    # a wider pull fetches exactly what the drop deleted of its range
    with SyncClient(b) as client:
        widened = client.pull(dataset_name, blocks="3-")
    assert widened.objects_transferred == 2 and _slices_missing(b, dataset_name) == 2
    assert _verified(b, dataset_name) == 2


def _newest_size(workspace: Path, name: str) -> int:
    with open_dataset(workspace, name) as dataset:
        return dataset.slices()[-1].data.size


def test_a_drop_stopped_midway_leaves_verify_clean_and_a_rerun_finishes(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, b, _ = _pulled(smart_server, dataset_name, tmp_path)
    deleted: list[str] = []
    delete = LocalStore.delete

    def fails_after_one(store: LocalStore, key: str) -> None:
        if deleted:
            raise StorageUnavailable("the disk went away")
        deleted.append(key)
        delete(store, key)

    monkeypatch.setattr(LocalStore, "delete", fails_after_one)
    with SyncClient(b) as client, pytest.raises(StorageUnavailable):
        client.drop(dataset_name, last=100)
    monkeypatch.undo()
    # the narrower choice was recorded before the first file went: the gone one is absent by choice
    assert _slices_missing(b, dataset_name) == 1
    assert _verified(b, dataset_name) == 1
    assert summary(run_cli("drop", dataset_name, "--last", "100", "--json", workspace=b))["objects"] == 3
    assert _verified(b, dataset_name) == 4


def test_a_drop_never_deletes_what_a_later_push_needs(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    _, b, _ = _pulled(smart_server, dataset_name, tmp_path)
    add_slices(b, dataset_name, tmp_path / "more", [10, 10], start=500)  # blocks 6-7: not pushed yet
    report = summary(run_cli("drop", dataset_name, "--state-only", "--json", workspace=b))
    assert (report["objects"], report["kept_for_push"]) == (5, 2)
    assert _slices_missing(b, dataset_name) == 5
    with open_dataset(b, dataset_name) as dataset:
        assert [entry.sequence_number for entry in dataset.slices(blocks=(6, 7))] == [6, 7]
        assert len(dataset.files(blocks=(6, 7))) == 2  # present: a push sends them
    assert _verified(b, dataset_name) == 5


def test_a_drop_of_older_checkpoints_keeps_the_installed_one_whole(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    with Workspace(tmp_path / "a") as a:
        stored = _pushed(a, dataset_name, url, tmp_path / "c", 3, "smart")
    b = tmp_path / "b"
    with SyncClient(b) as client:
        client.pull(url, all_checkpoints=True)
        report = client.drop(dataset_name, older_checkpoints=True)
    older = [ref for old in stored[:-1] for ref in _files(old)]
    assert (report.objects, report.bytes) == (len(older), sum(ref.size for ref in older))
    with Workspace(b) as opened:
        dataset = opened.dataset(dataset_name)
        assert dataset.objects_missing(older) == older and not dataset.objects_missing(_files(stored[-1]))
        assert opened.selections.get(dataset_name) == Selection()
        slot = CheckpointSlot(opened.root, dataset_name)
        assert slot.current_hash() == stored[-1].manifest.hash()
        for item in stored[-1].manifest.files:  # the installed files (links to the kept objects) read back
            assert item.physical_hash.matches((slot.current / item.name).read_bytes())
    assert _verified(b, dataset_name) == len(older)


def test_bad_drops_change_nothing(smart_server: ServerProcess, dataset_name: str, tmp_path: Path) -> None:
    _, b, _ = _pulled(smart_server, dataset_name, tmp_path)
    files = _objects(b)
    one_line_error(run_cli("drop", dataset_name, workspace=b), 2, "say what to keep")
    one_line_error(
        run_cli("drop", dataset_name, "--last", "5", "--blocks", "1-2", workspace=b), 2, "contradict each other: a drop"
    )
    one_line_error(run_cli("drop", dataset_name, "--blocks", "4-2", workspace=b), 2, "ends before it starts")
    one_line_error(run_cli("drop", dataset_name, "--since", "2999-01-01", workspace=b), 2, "in the future")
    one_line_error(run_cli("drop", dataset_name, "--last", "x", workspace=b), 2, "--last (last=) must be a whole")
    # a range past the head is refused as a pull refuses it (it would drop every slice and record that)
    one_line_error(run_cli("drop", dataset_name, "--blocks", "50-60", workspace=b), 2, "reach past the head")
    one_line_error(run_cli("drop", "no-such", "--last", "5", workspace=b), 1, "no-such")
    add_slices(b, "local-only", tmp_path / "local", [10])
    one_line_error(run_cli("drop", "local-only", "--state-only", workspace=b), 2, "has no remote")
    assert _objects(b)[: len(files)] == files or set(files) <= set(_objects(b))

    summary(run_cli("drop", dataset_name, "--last", "100", "--json", workspace=b))
    kept = _objects(b)
    # a range that wants what the workspace left out would call it lost: refused
    one_line_error(run_cli("drop", dataset_name, "--blocks", "1-5", workspace=b), 2, "left out by choice")
    with Workspace(b) as held:  # another writer holds the workspace: the drop waits, then says who
        result = run_cli("drop", dataset_name, "--state-only", workspace=b)
        assert held.selections.get(dataset_name) == LAST_100
    one_line_error(result, 1, "in use by")
    assert _objects(b) == kept
    with Workspace(b, read_only=True) as opened:
        assert opened.selections.get(dataset_name) == LAST_100
    assert _verified(b, dataset_name) == 4


def test_a_follower_of_the_last_records_keeps_its_disk_bounded(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    a, reader = tmp_path / "a", tmp_path / "reader"
    url = f"{smart_server.url}/{dataset_name}"
    start = add_slices(a, dataset_name, tmp_path / "in", [10, 10, 10])
    summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    follower = Follower(url, reader, "--last", "15")
    try:
        counts = []
        for round_ in range(6):
            start = add_slices(a, dataset_name, tmp_path / f"in{round_}", [10], start=start)
            head = str(summary(run_cli("push", dataset_name, url, "--json", workspace=a))["new_head"])
            follower.wait_for_head(head)
            counts.append(len(_objects(reader)))
        assert follower.interrupt() == 0, "".join(follower.errors)
    finally:
        follower.kill()
    # the last 15 records lie in the last 2 slices of 10: never more than those on disk, however long it runs
    assert counts == [2] * 6
    assert _slices_missing(reader, dataset_name) == 9 - 2
    assert _verified(reader, dataset_name) == 7


def test_a_plain_follower_keeps_only_the_latest_checkpoints_files(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    reader = tmp_path / "reader"
    with Workspace(tmp_path / "a") as a:
        stored = _pushed(a, dataset_name, url, tmp_path / "c", 1, "smart")
        head = str(a.dataset(dataset_name).require_tip().head)
    follower = Follower(url, reader)  # every slice, the latest checkpoint's files: the default
    try:
        follower.wait_for_head(head)
        for round_ in range(3):
            with Workspace(tmp_path / "a") as a:
                stored += _checkpoints(a, dataset_name, tmp_path / "c", 1, f"round{round_}-")  # new files each
                with SyncClient(a) as client:
                    head = str(client.push(dataset_name, url).new_head)
            follower.wait_for_head(head)
            with Workspace(reader, read_only=True) as held:
                dataset = held.dataset(dataset_name)
                # the previous latest checkpoint's files went once the update came (the server holds them)
                assert dataset.objects_missing(_files(stored[-2])) == _files(stored[-2])
                assert dataset.objects_missing(_files(stored[-1])) == []
        assert follower.interrupt() == 0, "".join(follower.errors)
    finally:
        follower.kill()
    assert _verified(reader, dataset_name) == sum(len(_files(old)) for old in stored[:-1])
