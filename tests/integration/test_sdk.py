"""The SDK used as a library: the sync facade, progress callbacks, typed errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from smart_transfer.client import DivergedError, ProgressUpdate, RemoteError, SyncClient
from smart_transfer.protocol.errors import ErrorCode
from tests.conftest import ServerProcess, make_files, run_cli


def test_sync_client_pulls_and_pushes_with_progress(local_server: ServerProcess, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    run_cli("add", "sdk", *map(str, make_files(tmp_path / "in", 5, 10_000)), workspace=a)
    updates: list[ProgressUpdate] = []
    with SyncClient(a, parallel=2, progress=updates.append) as client:
        pushed = client.push("sdk", f"{local_server.url}/sdk")
    assert (pushed.blocks, pushed.objects_transferred, pushed.bytes_transferred) == (6, 5, 50_000)
    assert updates[-1].objects_done == updates[-1].objects_total == 5
    assert updates[-1].bytes_done == updates[-1].bytes_total == 50_000
    assert [u.bytes_done for u in updates] == sorted(u.bytes_done for u in updates)
    with SyncClient(b) as client:
        pulled = client.pull(f"{local_server.url}/sdk", as_name="copy")
        assert pulled.new_head == pushed.new_head
        assert client.workspace.dataset("copy").require_tip().head.__str__() == pushed.new_head


def test_sdk_errors_are_typed(local_server: ServerProcess, tmp_path: Path) -> None:
    with SyncClient(tmp_path / "x") as client, pytest.raises(RemoteError) as caught:
        client.pull(f"{local_server.url}/never-created")
    assert caught.value.code is ErrorCode.DATASET_NOT_FOUND
    a, b = tmp_path / "a", tmp_path / "b"
    files = make_files(tmp_path / "in", 2, 10)
    run_cli("add", "fork", str(files[0]), workspace=a)
    run_cli("add", "fork", str(files[1]), workspace=b)
    with SyncClient(a) as client:
        client.push("fork", f"{local_server.url}/fork")
    with SyncClient(b) as client, pytest.raises(DivergedError):
        client.push("fork", f"{local_server.url}/fork")
