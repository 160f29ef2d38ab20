"""One workspace, several processes: the reading commands run beside a follower that holds the index;
the follower records its remote at the first catch-up, so `status` and `pull NAME` work during the
follow and after the follower was killed; a writer waits for the index, then names the process that
holds it."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import orjson
import pytest

from smart_transfer.repo import Workspace
from smart_transfer.repo.index import INDEX_LOCK_WAIT_SECONDS, lock_holder
from tests.conftest import ServerProcess, make_files, run_cli, summary
from tests.integration.test_follow import Follower, push_one


def _readers_succeed(workspace: Path, name: str, head: str) -> None:
    logged = run_cli("log", name, "--json", workspace=workspace)
    assert logged.returncode == 0, logged.stderr
    assert orjson.loads(logged.stdout.splitlines()[0])["hash"] == head
    listed = run_cli("list", "--json", workspace=workspace)
    assert listed.returncode == 0, listed.stderr
    assert [d["name"] for d in orjson.loads(listed.stdout)] == [name]
    for command in (("remote", "list"), ("verify", name)):  # (tail and export: tests/integration/test_read.py)
        result = run_cli(*command, workspace=workspace)
        assert result.returncode == 0, (command, result.stderr)


def test_readers_and_status_run_beside_a_follower_and_after_it_was_killed(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    url = f"{smart_server.url}/{dataset_name}"
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "in", 2, 100)), workspace=a)
    first = summary(run_cli("push", dataset_name, url, "--json", workspace=a))["new_head"]
    follower = Follower(url, b)
    try:
        follower.wait_for_head(first)
        assert lock_holder(b / "index" / "LOCK") is not None  # the follower holds the index
        _readers_succeed(b, dataset_name, first)
        status = run_cli("status", dataset_name, "--json", workspace=b)  # its remote is recorded already
        assert status.returncode == 0, status.stderr
        assert orjson.loads(status.stdout)["relation"] == "same"
        second = push_one(a, dataset_name, url, "two")
        follower.wait_for_head(second)
        _readers_succeed(b, dataset_name, second)
    finally:
        follower.process.send_signal(signal.SIGKILL)
        follower.process.wait(30)
    third = push_one(a, dataset_name, url, "three")
    status = run_cli("status", dataset_name, "--json", workspace=b)
    assert status.returncode == 0 and orjson.loads(status.stdout)["relation"] == "remote-ahead", status.stderr
    pulled = summary(run_cli("pull", dataset_name, "--json", workspace=b))  # by name: the recorded remote
    assert pulled["new_head"] == third


def test_a_writer_waits_for_the_index_then_names_the_process_holding_it(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    run_cli("add", "held", *map(str, make_files(tmp_path / "in", 1, 10)), workspace=workspace)
    holder = Workspace(workspace)  # this process holds the index, as a running pull would
    try:
        started = time.monotonic()
        result = run_cli("add", "held", str(make_files(tmp_path / "more", 1, 10)[0]), workspace=workspace)
        waited = time.monotonic() - started
        log = run_cli("log", "held", "--json", workspace=workspace)  # a reader does not wait
    finally:
        holder.close()
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and f"in use by process {os.getpid()}" in lines[0], lines
    assert waited >= INDEX_LOCK_WAIT_SECONDS - 0.5
    assert log.returncode == 0 and len(log.stdout.splitlines()) == 2  # Seed and one AddData
    after = run_cli("add", "held", str(make_files(tmp_path / "more2", 1, 11)[0]), workspace=workspace)
    assert after.returncode == 0, after.stderr  # released: the writer goes ahead at once


@pytest.mark.parametrize("command", [("log", "x"), ("list",), ("tail", "x"), ("remote", "list")])
def test_reading_commands_create_no_workspace(tmp_path: Path, command: tuple[str, ...]) -> None:
    result = run_cli(*command, workspace=tmp_path / "none")
    assert result.returncode != 0 and not (tmp_path / "none").exists()


def test_a_second_open_in_the_same_process_fails_at_once(tmp_path: Path) -> None:
    from smart_transfer.repo import RepositoryError
    from smart_transfer.repo.index import RepositoryIndex

    first = RepositoryIndex(tmp_path / "index")
    try:
        started = time.monotonic()
        with pytest.raises(RepositoryError, match="already open in this process"):
            RepositoryIndex(tmp_path / "index")
        assert time.monotonic() - started < INDEX_LOCK_WAIT_SECONDS / 2
    finally:
        first.close()
