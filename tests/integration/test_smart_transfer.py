"""The Smart Transfer Protocol end to end: real CLI processes against a real server process, on the
embedded store and on the local S3 server (every test runs on both)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import orjson
import pytest

from tests.conftest import CLI, ServerProcess, make_files, run_cli, summary
from tests.unit.test_startup import NOT_BEFORE_OBJECTS_MOVE

#: Runs the command line (its arguments after ``-c``), then names on stderr the modules loaded that a
#: pull or push loads only once objects move.
COUNTING_IMPORTS = f"""
import sys
from smart_transfer.cli.main import main
code = main(sys.argv[1:])
loaded = sorted(n for n in sys.modules if n.startswith({NOT_BEFORE_OBJECTS_MOVE!r}))
print("LOADED:" + ",".join(loaded), file=sys.stderr)
sys.exit(code)
"""


def run_counting_imports(*args: str, workspace: Path) -> tuple[subprocess.CompletedProcess[str], str]:
    """``run_cli``, and the modules it loaded that a pull or push with nothing to move must not load."""
    result = subprocess.run(
        [sys.executable, "-c", COUNTING_IMPORTS, *args, "--workspace", str(workspace)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    lines = result.stderr.splitlines()
    return result, lines[-1].removeprefix("LOADED:") if lines and lines[-1].startswith("LOADED:") else "?"


def log_of(workspace: Path, name: str) -> list[dict[str, object]]:
    result = run_cli("log", name, "--json", workspace=workspace)
    assert result.returncode == 0, result.stderr
    return [orjson.loads(line) for line in result.stdout.splitlines()]


def files_of(workspace: Path, name: str) -> dict[str, bytes]:
    store = workspace / "store" / name / "data"
    return {p.name: p.read_bytes() for p in store.iterdir()} if store.exists() else {}


def test_fresh_incremental_and_up_to_date_pull(smart_server: ServerProcess, dataset_name: str, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    url = f"{smart_server.url}/{dataset_name}"
    assert run_cli("add", dataset_name, *map(str, make_files(tmp_path / "in", 3, 3000)), workspace=a).returncode == 0
    summary(run_cli("push", dataset_name, url, "--json", workspace=a))

    fresh = summary(run_cli("pull", url, "--json", workspace=b))
    assert (fresh["blocks"], fresh["objects_transferred"], fresh["bytes_transferred"]) == (4, 3, 9000)
    assert log_of(b, dataset_name) == log_of(a, dataset_name)
    assert files_of(b, dataset_name) == files_of(a, dataset_name)

    assert (
        run_cli("add", dataset_name, *map(str, make_files(tmp_path / "more", 1, 500, "m")), workspace=a).returncode == 0
    )
    summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    incremental = summary(run_cli("pull", url, "--json", workspace=b))
    assert (incremental["blocks"], incremental["objects_transferred"], incremental["bytes_transferred"]) == (1, 1, 500)
    assert log_of(b, dataset_name) == log_of(a, dataset_name)

    result, loaded = run_counting_imports("pull", url, "--json", workspace=b)
    again = summary(result)
    assert again["up_to_date"] is True
    assert (again["blocks"], again["objects_transferred"]) == (0, 0)
    assert loaded == "", f"an up-to-date pull loaded {loaded}"


def test_push_new_incremental_noop_and_no_reupload(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    url = f"{smart_server.url}/{dataset_name}"
    files = make_files(tmp_path / "in", 4, 2000)
    run_cli("add", dataset_name, *map(str, files[:3]), workspace=a)
    first = summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    assert (first["old_head"], first["blocks"], first["objects_transferred"]) == (None, 4, 3)

    run_cli("add", dataset_name, str(files[3]), workspace=a)
    second = summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    assert (second["blocks"], second["objects_transferred"], second["objects_skipped"]) == (1, 1, 0)

    result, loaded = run_counting_imports("push", dataset_name, url, "--json", workspace=a)
    noop = summary(result)
    assert noop["up_to_date"] is True
    assert (noop["blocks"], noop["objects_transferred"]) == (0, 0)
    assert loaded == "", f"a push with nothing to move loaded {loaded}"

    # B adds a file whose content the server already has, plus a new one: only the new one moves
    summary(run_cli("pull", url, "--json", workspace=b))
    new = make_files(tmp_path / "new", 1, 100, "n")[0]
    run_cli("add", dataset_name, str(files[0]), str(new), workspace=b)
    third = summary(run_cli("push", dataset_name, url, "--json", workspace=b))
    assert (third["blocks"], third["objects_transferred"], third["objects_skipped"]) == (2, 1, 1)


def test_divergence_needs_force_and_force_keeps_the_seed(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    url = f"{smart_server.url}/{dataset_name}"
    files = make_files(tmp_path / "in", 4, 100)
    run_cli("add", dataset_name, str(files[0]), workspace=a)
    summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    summary(run_cli("pull", url, "--json", workspace=b))
    run_cli("add", dataset_name, str(files[1]), workspace=a)
    run_cli("add", dataset_name, str(files[2]), workspace=b)
    summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    remote_head = log_of(a, dataset_name)[0]["hash"]

    rejected = run_cli("push", dataset_name, url, workspace=b)
    assert rejected.returncode == 3
    assert "pull first" in rejected.stderr and "Traceback" not in rejected.stderr
    diverged = run_cli("pull", url, workspace=b)
    assert diverged.returncode == 3
    assert "diverged" in diverged.stderr
    assert log_of(b, dataset_name)[0]["sequence_number"] == 2  # unchanged

    forced_pull = summary(run_cli("pull", url, "--force", "--json", workspace=b))
    assert forced_pull["new_head"] == remote_head
    assert log_of(b, dataset_name) == log_of(a, dataset_name)

    run_cli("add", dataset_name, str(files[3]), workspace=b)
    run_cli("add", dataset_name, str(files[2]), workspace=a)
    summary(run_cli("push", dataset_name, url, "--json", workspace=b))
    assert run_cli("push", dataset_name, url, workspace=a).returncode == 3
    forced_push = summary(run_cli("push", dataset_name, url, "--force", "--json", workspace=a))
    assert forced_push["new_head"] == log_of(a, dataset_name)[0]["hash"]

    # a different dataset with the same name (another Seed) never replaces the remote one
    run_cli("add", dataset_name, str(files[0]), workspace=c)
    other_seed = run_cli("push", dataset_name, url, "--force", workspace=c)
    assert other_seed.returncode == 3
    assert "Seed" in other_seed.stderr
    check = summary(run_cli("pull", url, "--json", workspace=a))
    assert check["up_to_date"] is True


def test_concurrent_pushes_from_one_base_have_one_winner(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    base = tmp_path / "base"
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "in", 2, 100)), workspace=base)
    summary(run_cli("push", dataset_name, url, "--json", workspace=base))
    workspaces = [tmp_path / f"w{i}" for i in range(3)]
    for i, ws in enumerate(workspaces):
        summary(run_cli("pull", url, "--json", workspace=ws))
        run_cli("add", dataset_name, *map(str, make_files(tmp_path / f"new{i}", 20, 2000, f"w{i}")), workspace=ws)
    results: dict[int, subprocess.CompletedProcess[str]] = {}
    barrier = threading.Barrier(len(workspaces))

    def push(i: int) -> None:
        barrier.wait()
        results[i] = run_cli("push", dataset_name, url, "--json", workspace=workspaces[i])

    threads = [threading.Thread(target=push, args=(i,)) for i in range(len(workspaces))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    codes = sorted(r.returncode for r in results.values())
    assert codes == [0, 3, 3], [r.stderr for r in results.values()]
    winner = next(i for i, r in results.items() if r.returncode == 0)
    # the remote chain is exactly the winner's: a fresh pull reproduces it block for block
    check = tmp_path / "check"
    summary(run_cli("pull", url, "--json", workspace=check))
    assert log_of(check, dataset_name) == log_of(workspaces[winner], dataset_name)
    assert files_of(check, dataset_name) == files_of(workspaces[winner], dataset_name)


def test_a_corrupted_object_fails_the_pull_and_moves_nothing(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    url = f"{smart_server.url}/{dataset_name}"
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "in", 3, 1000)), workspace=a)
    summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    victim = log_of(a, dataset_name)[0]["new_data"]["physical_hash"]  # type: ignore[index]
    _overwrite_remote_object(smart_server, request, f"{dataset_name}/data/{victim}", b"x" * 1000)

    failed = run_cli("pull", url, workspace=b)
    assert failed.returncode == 1
    assert str(victim) in failed.stderr and "does not match its hash" in failed.stderr
    assert orjson.loads(run_cli("list", "--json", workspace=b).stdout) == []
    assert not (b / "store" / dataset_name / "data" / str(victim)).exists()


def test_a_corrupted_mid_size_object_is_refused_and_nothing_is_visible(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """An 8 MiB object streams through a file, hashed by the writer thread as it arrives: a damaged one
    of the right size fails at its last byte and leaves neither the object nor a temporary file."""
    a, b = tmp_path / "a", tmp_path / "b"
    url = f"{smart_server.url}/{dataset_name}"
    (tmp_path / "in").mkdir()
    source = tmp_path / "in" / "mid.bin"
    source.write_bytes(os.urandom(8 * 2**20))
    run_cli("add", dataset_name, str(source), workspace=a)
    summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    victim = log_of(a, dataset_name)[0]["new_data"]["physical_hash"]  # type: ignore[index]
    _overwrite_remote_object(smart_server, request, f"{dataset_name}/data/{victim}", b"x" * (8 * 2**20))

    failed = run_cli("pull", url, workspace=b)
    assert failed.returncode == 1
    assert str(victim) in failed.stderr and "does not match its hash" in failed.stderr
    assert orjson.loads(run_cli("list", "--json", workspace=b).stdout) == []
    left = [p for p in b.rglob("*") if p.is_file() and p.stat().st_size >= 2**20]
    assert left == []  # no object, no staging or temporary file of it


def _overwrite_remote_object(server: ServerProcess, request: pytest.FixtureRequest, key: str, data: bytes) -> None:
    """Corrupt an object behind the server's back, in whatever store it uses."""
    if server.backend == "local":
        (server.root / "store" / key).write_bytes(data)
        return
    from smart_transfer.storage.s3 import S3Store

    s3_env = request.getfixturevalue("s3_env")
    prefix = next(a for a in server.process.args if str(a).startswith("srv-"))  # type: ignore[union-attr]
    store = S3Store(s3_env.bucket, str(prefix), endpoint_url=s3_env.endpoint)
    store.put(key, data)
    store.close()


def test_smart_path_moves_no_object_bytes_through_the_server(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    before = httpx.get(smart_server.url + "/").json()["object_bytes_through_server"]
    url = f"{smart_server.url}/{dataset_name}"
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "in", 5, 50_000)), workspace=tmp_path / "a")
    pushed = summary(run_cli("push", dataset_name, url, "--json", workspace=tmp_path / "a"))
    pulled = summary(run_cli("pull", url, "--json", workspace=tmp_path / "b"))
    assert pushed["bytes_transferred"] == pulled["bytes_transferred"] == 250_000
    after = httpx.get(smart_server.url + "/").json()["object_bytes_through_server"]
    if smart_server.backend == "s3":
        assert after == before == 0  # the session only signed; S3 moved every byte
    else:
        # the embedded store is this process, so its /_store routes moved exactly the object bytes
        # (the counter works) and the WebSocket sessions moved none on top of them
        assert after - before == 500_000


def test_bad_urls_and_names_give_one_clear_line(smart_server: ServerProcess, tmp_path: Path) -> None:
    cases = [
        (("pull", f"{smart_server.url}/no-such-dataset"), 1, "does not exist"),
        (("pull", f"{smart_server.url}/a..b"), 2, "invalid dataset name"),
        (("pull", "ftp://host/ds"), 2, "not a dataset URL"),
        (("pull", "http://127.0.0.1:9/ds"), 1, "cannot reach"),
        (("push", "nothing-here", f"{smart_server.url}/x"), 1, "dataset not found"),
        (("pull", f"{smart_server.url}/ds", "--parallel", "0"), 2, "--parallel"),
        (("pull", f"{smart_server.url}/ds", "--limit-rate", "fast"), 2, "not a size or rate"),
    ]
    # a workspace with another dataset: a failed first pull leaves none behind for the push to find
    (tmp_path / "f").write_bytes(b"x")
    added = subprocess.run(
        [*CLI, "add", "other", str(tmp_path / "f"), "--workspace", str(tmp_path)], capture_output=True, check=False
    )
    assert added.returncode == 0, added.stderr
    for args, code, fragment in cases:
        result = subprocess.run(
            [*CLI, *args, "--workspace", str(tmp_path)], capture_output=True, text=True, check=False
        )
        assert result.returncode == code, (args, result.stderr)
        assert fragment in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
