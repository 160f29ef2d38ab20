"""A pull moves the latest checkpoint's files only, on both stores and both protocols: older
checkpoints' blocks and manifests arrive and are verified, their files stay on the server, recorded as
absent by choice (``status`` and ``verify`` tell them from lost ones); ``all_checkpoints`` fetches
exactly what is missing; a push from a partial workspace re-sends nothing the server holds and commits
nothing where the server lacks what the workspace left out.

Checkpoints are made through the checkpoint API (as ingest does after its Spark job), with no file in
common between them: each changes every row."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from smart_transfer.checkpoint.files import StoredCheckpoint
from smart_transfer.checkpoint.slot import CheckpointSlot
from smart_transfer.client import SyncClient
from smart_transfer.client.inspection.holdings import holdings
from smart_transfer.client.inspection.verify import verify_local
from smart_transfer.errors import LocalError
from smart_transfer.model import ObjectKind, ObjectRef
from smart_transfer.model.selection import EVERYTHING, Selection
from smart_transfer.repo import Workspace
from smart_transfer.storage import ObjectInfo, ObjectStore
from smart_transfer.storage.local import LocalStore
from smart_transfer.storage.s3 import S3Store
from tests.conftest import S3Env, ServerProcess, backend_args, run_cli, summary
from tests.scale import RUNTIME_FILES, commit_checkpoint, sst_names, write_checkpoint


def _checkpoints(workspace: Workspace, name: str, directory: Path, count: int, tag: str) -> list[StoredCheckpoint]:
    """``count`` checkpoints of 6 SST files and RocksDB's small files, none sharing a file with another."""
    made = []
    for i in range(count):
        names = [*sst_names(6, 1000 * (len(list(directory.glob("*"))) + 1)), *RUNTIME_FILES]
        made.append(commit_checkpoint(workspace, name, write_checkpoint(directory / f"{tag}{i}", names, f"{tag}{i}")))
    return made


def _pushed(
    workspace: Workspace, name: str, url: str, directory: Path, count: int, protocol: str
) -> list[StoredCheckpoint]:
    """``count`` new checkpoints of dataset ``name`` (see ``_checkpoints``), pushed to ``url``."""
    stored = _checkpoints(workspace, name, directory, count, workspace.root.name)
    with SyncClient(workspace, protocol=protocol) as client:
        client.push(name, url)
    return stored


def _files(stored: StoredCheckpoint) -> list[ObjectRef]:
    return [ObjectRef(ObjectKind.CHECKPOINT, f.physical_hash, f.size) for f in stored.manifest.files]


def _present(workspace: Workspace, name: str, refs: list[ObjectRef]) -> bool:
    return not workspace.dataset(name).objects_missing(refs)


@pytest.mark.parametrize("protocol", ["smart", "simple"])
def test_a_fresh_pull_moves_the_latest_checkpoint_and_all_checkpoints_the_rest(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, protocol: str
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    with Workspace(tmp_path / "a") as a, Workspace(tmp_path / "b") as b:
        stored = _pushed(a, dataset_name, url, tmp_path / "c", 3, protocol)
        latest, older = stored[-1], stored[:-1]
        older_files = [ref for old in older for ref in _files(old)]
        with SyncClient(b, protocol=protocol) as client:
            pulled = client.pull(url)
        assert pulled.objects_transferred == len(_files(latest))
        assert pulled.bytes_transferred == sum(r.size for r in _files(latest))
        dataset = b.dataset(dataset_name)
        assert b.selections.get(dataset_name) == Selection()
        for old in older:  # the manifests arrived and read back, verified against their hashes
            root = ObjectRef(ObjectKind.CHECKPOINT, old.manifest.hash(), len(old.manifest.encode()))
            assert dataset.read_manifest(root) == old.manifest
        assert dataset.objects_missing(older_files) == older_files
        assert CheckpointSlot(b.root, dataset_name).current_hash() == latest.manifest.hash()
        report, _ = verify_local(b, dataset_name)
        assert report.ok, report.problems
        assert (report.absent_objects, report.absent_bytes) == (len(older_files), sum(r.size for r in older_files))
        partial = holdings(b, dataset_name)
        assert partial is not None and (partial.absent_objects, partial.absent_bytes) == (
            report.absent_objects,
            report.absent_bytes,
        )

        with SyncClient(b, protocol=protocol) as client:
            widened = client.pull(url, all_checkpoints=True)
        assert (widened.objects_transferred, widened.bytes_transferred) == (report.absent_objects, report.absent_bytes)
        assert b.selections.get(dataset_name) == EVERYTHING and _present(b, dataset_name, older_files)
        again, _ = verify_local(b, dataset_name)
        assert again.ok and again.absent_objects == 0 and holdings(b, dataset_name) is None
        with SyncClient(b, protocol=protocol) as client:
            assert client.pull(url, all_checkpoints=True).objects_transferred == 0


@pytest.mark.parametrize("protocol", ["smart", "simple"])
def test_an_incremental_pull_moves_only_the_new_latest_checkpoint(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, protocol: str
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    with Workspace(tmp_path / "a") as a, Workspace(tmp_path / "b") as b:
        first = _checkpoints(a, dataset_name, tmp_path / "c", 1, "x")[0]
        with SyncClient(a, protocol=protocol) as client:
            client.push(dataset_name, url)
        with SyncClient(b, protocol=protocol) as client:
            assert client.pull(url).objects_transferred == len(_files(first))
        middle, newest = _pushed(a, dataset_name, url, tmp_path / "c", 2, protocol)
        with SyncClient(b, protocol=protocol) as client:
            pulled = client.pull(url)
        assert pulled.objects_transferred == len(_files(newest))
        assert _present(b, dataset_name, _files(first))  # what it held stays (dropping it is a choice of its own)
        assert b.dataset(dataset_name).objects_missing(_files(middle)) == _files(middle)
        report, _ = verify_local(b, dataset_name)
        assert report.ok and report.absent_objects == len(_files(middle))


@pytest.mark.parametrize("protocol", ["smart", "simple"])
def test_a_push_from_a_partial_workspace_sends_only_what_is_new_or_commits_nothing(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, protocol: str
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    with Workspace(tmp_path / "a") as a, Workspace(tmp_path / "b") as b:
        _pushed(a, dataset_name, url, tmp_path / "c", 3, protocol)
        with SyncClient(b, protocol=protocol) as client:
            client.pull(url)
        mine = _checkpoints(b, dataset_name, tmp_path / "c", 1, "b")[0]
        with SyncClient(b, protocol=protocol) as client:
            pushed = client.push(dataset_name, url)  # the server holds every absent file: none is re-sent
        assert pushed.objects_transferred == mine.files + mine.pages

        elsewhere = f"{smart_server.url}/{dataset_name}-copy"
        with SyncClient(b, protocol=protocol) as client:
            with pytest.raises(LocalError) as refused:
                client.push(dataset_name, elsewhere)
            message = str(refused.value)
            assert "\n" not in message and "--all-checkpoints`" in message and "nothing was committed" in message
            assert "checkpoints/" in message
            assert client.status(dataset_name, elsewhere).relation == "remote-missing"  # nothing committed there
        report, _ = verify_local(b, dataset_name)
        assert report.ok and report.absent_objects > 0


def _server_store(server: ServerProcess, s3: S3Env | None) -> ObjectStore:
    """The server's own store (its embedded one, or its prefix of the local S3), to look behind it."""
    if s3 is None:
        return LocalStore(server.root / "store")
    prefix = next(str(arg) for arg in server.process.args if str(arg).startswith("srv-"))  # type: ignore[union-attr]
    return S3Store(s3.bucket, prefix, endpoint_url=s3.endpoint)


def _traces(store: ObjectStore) -> tuple[list[ObjectInfo], list[str]]:
    """Every object the store holds, and every multipart upload in progress (by key)."""
    return list(store.list("")), sorted(upload.key for upload in store.list_multipart(""))


@pytest.mark.parametrize("protocol", ["smart", "simple"])
@pytest.mark.parametrize("backend", ["local", "s3"])
def test_a_push_the_remote_cannot_take_from_a_partial_workspace_changes_nothing_there(
    server_factory: Callable[..., ServerProcess],
    request: pytest.FixtureRequest,
    tmp_path: Path,
    protocol: str,
    backend: str,
) -> None:
    s3: S3Env | None = request.getfixturevalue("s3_env") if backend == "s3" else None
    # every object over a byte goes in parts: one the push offered for upload would start a multipart upload
    server = server_factory("--multipart-threshold", "1", *backend_args(backend, s3))
    url = f"{server.url}/held"
    with Workspace(tmp_path / "a") as a, Workspace(tmp_path / "b") as b:
        _pushed(a, "held", url, tmp_path / "c", 2, protocol)
        with SyncClient(b, protocol=protocol) as client:
            client.pull(url)  # the latest checkpoint's files only
        mine = _checkpoints(b, "held", tmp_path / "c", 1, "b")[0]
        store = _server_store(server, s3)
        try:
            before = _traces(store)
            with SyncClient(b, protocol=protocol) as client:
                with pytest.raises(LocalError) as refused:
                    client.push("held", f"{server.url}/elsewhere")
                assert "nothing was committed" in str(refused.value) and "stored there" not in str(refused.value)
                # not a multipart upload started, not a block written: the server's store is as it was
                assert _traces(store) == before and before[1] == []
                pushed = client.push("held", url)  # where the remote holds them: nothing absent re-sent
            assert pushed.objects_transferred == mine.files + mine.pages
            assert _traces(store)[1] == []
        finally:
            store.close()


@pytest.mark.parametrize("protocol", ["smart"])
def test_a_lost_file_of_the_latest_checkpoint_is_repaired_and_absent_ones_stay_absent(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, protocol: str
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    with Workspace(tmp_path / "a") as a, Workspace(tmp_path / "b") as b:
        stored = _pushed(a, dataset_name, url, tmp_path / "c", 2, protocol)
        with SyncClient(b, protocol=protocol) as client:
            client.pull(url)
        lost = _files(stored[-1])[0]
        b.local_store.path_of(b.dataset(dataset_name).object_key(lost)).unlink()
        report, _ = verify_local(b, dataset_name)  # damage is a problem; absent by choice is not
        assert not report.ok and any(lost.label in p and "missing" in p for p in report.problems)
        assert report.absent_objects == len(_files(stored[0]))
        with SyncClient(b, protocol=protocol) as client:
            repaired = client.pull(url)
        assert repaired.objects_transferred == 1 and repaired.objects_repaired == 1
        healthy, _ = verify_local(b, dataset_name)
        assert healthy.ok and healthy.absent_objects == len(_files(stored[0]))


def test_the_cli_says_what_is_absent_by_choice_and_fetches_it(local_server: ServerProcess, tmp_path: Path) -> None:
    url = f"{local_server.url}/cli-partial"
    with Workspace(tmp_path / "a") as a:
        stored = _pushed(a, "cli-partial", url, tmp_path / "c", 2, "smart")
    older = len(_files(stored[0]))
    assert "--all-checkpoints" in run_cli("pull", "--help").stdout
    workspace = tmp_path / "b"
    assert run_cli("pull", url, "--json", workspace=workspace).returncode == 0
    status = run_cli("status", "cli-partial", workspace=workspace)
    assert status.returncode == 0, status.stderr
    assert f"{older} object(s)" in status.stdout and "absent by choice" in status.stdout
    verified = run_cli("verify", "cli-partial", workspace=workspace)
    assert verified.returncode == 0 and "absent by choice" in verified.stdout and "problem" not in verified.stdout
    widened = summary(run_cli("pull", "cli-partial", "--all-checkpoints", "--json", workspace=workspace))
    assert widened["objects_transferred"] == older
    assert "absent by choice" not in run_cli("status", "cli-partial", workspace=workspace).stdout
