"""Atomicity, resume, URL expiry and scale of the smart path, on both backends."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from tests.conftest import CLI, ServerProcess, backend_args, make_files, run_cli, summary

#: Slow enough that a kill lands mid-transfer (60 x 16 KiB take ~3.5 s), fast enough to keep the suite short.
SLOW_RATE = "300K"
#: Random kill points per flow and backend here (the long fault runs of `make test-faults` do more).
KILL_POINTS = 4


def log_of(workspace: Path, name: str) -> list[dict[str, object]] | None:
    result = run_cli("log", name, "--json", workspace=workspace)
    if result.returncode != 0:
        # nothing local yet: no dataset, or not even a workspace (a pull killed before it made one)
        assert "dataset not found" in result.stderr or "no workspace at" in result.stderr, result.stderr
        return None
    return [orjson.loads(line) for line in result.stdout.splitlines()]


def kill_after(args: list[str], workspace: Path, seconds: float) -> int:
    """Start the CLI, SIGKILL it after ``seconds`` (if still running); returns its exit status."""
    process = subprocess.Popen(
        [*CLI, *args, "--workspace", str(workspace)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        process.wait(seconds)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        process.wait()
    return process.returncode


def kill_when(args: list[str], workspace: Path, ready: Callable[[], bool], timeout: float = 60) -> int:
    """Start the CLI and SIGKILL it as soon as ``ready()`` holds (some objects arrived): a kill in
    the middle, however slow the machine is today. Returns its exit status."""
    process = subprocess.Popen(
        [*CLI, *args, "--workspace", str(workspace)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline and not ready():
        time.sleep(0.05)
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    process.wait()
    return process.returncode


def remote_objects(server: ServerProcess, request: pytest.FixtureRequest, name: str) -> int:
    """How many data objects the server's store holds for ``name`` (whatever the backend)."""
    if server.backend == "local":
        return len(list((server.root / "store" / name / "data").glob("*")))
    from smart_transfer.storage.s3 import S3Store

    s3_env = request.getfixturevalue("s3_env")
    prefix = next(str(a) for a in server.process.args if str(a).startswith("srv-"))  # type: ignore[union-attr]
    store = S3Store(s3_env.bucket, prefix, endpoint_url=s3_env.endpoint)
    try:
        return sum(1 for _ in store.list(f"{name}/data/"))
    finally:
        store.close()


def remote_chain(server: ServerProcess, name: str, scratch: Path) -> list[dict[str, object]] | None:
    """The remote dataset as a fresh workspace sees it (None: it does not exist)."""
    result = run_cli("pull", f"{server.url}/{name}", "--json", workspace=scratch)
    if result.returncode != 0:
        assert "does not exist" in result.stderr, result.stderr
        return None
    return log_of(scratch, name)


def test_killed_pushes_leave_the_old_head_and_a_rerun_resumes(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    a = tmp_path / "a"
    url = f"{smart_server.url}/{dataset_name}"
    push = ["push", dataset_name, url, "--limit-rate", SLOW_RATE, "--parallel", "4"]
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "in", 60, 16_384)), workspace=a)
    # a kill in the middle, then a rerun: it finishes and does not upload again what arrived
    arrived = lambda: remote_objects(smart_server, request, dataset_name) >= 5  # noqa: E731
    assert kill_when(push, a, arrived) == -signal.SIGKILL
    assert remote_chain(smart_server, dataset_name, tmp_path / "check") is None
    resumed = summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    assert resumed["objects_skipped"] > 0
    assert resumed["objects_transferred"] + resumed["objects_skipped"] == 60
    assert remote_chain(smart_server, dataset_name, tmp_path / "check2") == log_of(a, dataset_name)
    # kills at random points of an incremental push: the remote is always old or new, never between
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "more", 60, 16_384, "m")), workspace=a)
    old = log_of(tmp_path / "check2", dataset_name)
    new = log_of(a, dataset_name)
    rng = random.Random(20261120)
    for attempt in range(KILL_POINTS):
        kill_after(push, a, rng.uniform(0.2, 2.5))
        assert remote_chain(smart_server, dataset_name, tmp_path / "check2") in (old, new), attempt
    summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    assert remote_chain(smart_server, dataset_name, tmp_path / "final") == new


def test_killed_pulls_leave_the_old_head_and_a_rerun_resumes(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    url = f"{smart_server.url}/{dataset_name}"
    pull = ["pull", url, "--limit-rate", SLOW_RATE, "--parallel", "4"]
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "in", 60, 16_384)), workspace=a)
    summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    downloaded = lambda: len(list((b / "store" / dataset_name / "data").glob("*"))) >= 5  # noqa: E731
    assert kill_when(pull, b, downloaded) == -signal.SIGKILL
    assert log_of(b, dataset_name) is None  # nothing half-visible
    resumed = summary(run_cli("pull", url, "--json", workspace=b))
    assert resumed["objects_skipped"] > 0
    assert resumed["objects_transferred"] + resumed["objects_skipped"] == 60
    assert log_of(b, dataset_name) == log_of(a, dataset_name)
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "more", 60, 16_384, "m")), workspace=a)
    summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    old, new = log_of(b, dataset_name), log_of(a, dataset_name)
    rng = random.Random(11)
    for attempt in range(KILL_POINTS):
        kill_after(pull, b, rng.uniform(0.2, 2.5))
        assert log_of(b, dataset_name) in (old, new), attempt
    summary(run_cli("pull", url, "--json", workspace=b))
    assert log_of(b, dataset_name) == new


def test_short_lived_urls_are_refreshed_during_slow_transfers(
    request: pytest.FixtureRequest, server_factory: object, dataset_name: str, tmp_path: Path
) -> None:
    results = {}
    for backend in ("local", "s3"):
        s3 = request.getfixturevalue("s3_env") if backend == "s3" else None
        server = server_factory("--url-ttl", "2", *backend_args(backend, s3))  # type: ignore[operator]
        url = f"{server.url}/{dataset_name}"
        a, b = tmp_path / f"{backend}-a", tmp_path / f"{backend}-b"
        run_cli("add", dataset_name, *map(str, make_files(tmp_path / f"{backend}-in", 6, 16_384)), workspace=a)
        # two objects in flight share 16 KiB/s: each takes about 2 s, so the URLs the first page hands out
        # for the third and later objects are past their 2 s lifetime when a worker takes them, however
        # the client sizes its queue of URLs (which it does to make refreshes rare)
        slow = ["--limit-rate", "16K", "--parallel", "2", "--json"]
        pushed = summary(run_cli("push", dataset_name, url, *slow, workspace=a))
        pulled = summary(run_cli("pull", url, *slow, workspace=b))
        results[backend] = (pushed, pulled)
        assert pushed["objects_transferred"] == pulled["objects_transferred"] == 6
        assert pushed["seconds"] > 4 and pulled["seconds"] > 4  # far beyond the 2 s URL lifetime
        assert pushed["urls_refreshed"] > 0 and pulled["urls_refreshed"] > 0
        assert log_of(b, dataset_name) == log_of(a, dataset_name)


MEMORY_PROBE = (
    "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True);"
    "sys.stdout.write(r.stdout); sys.stderr.write(r.stderr);"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(r.returncode)"
)
#: Generous bound on a client's peak memory for 10,000 objects: paging keeps it flat.
MAX_CLIENT_RSS_KIB = 400 * 1024


def run_measured(*args: str, workspace: Path) -> tuple[dict[str, object], int]:
    result = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, *CLI, *args, "--workspace", str(workspace)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return orjson.loads(result.stdout), int(result.stderr.strip().splitlines()[-1])


def test_ten_thousand_objects_move_with_bounded_memory(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    url = f"{smart_server.url}/{dataset_name}"
    source = tmp_path / "in"
    source.mkdir()
    for i in range(10_000):
        (source / f"{i:05d}").write_bytes(os.urandom(4096))
    added = subprocess.run(
        [*CLI, "add", dataset_name, *map(str, sorted(source.iterdir())), "--workspace", str(a)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert added.returncode == 0, added.stderr
    started = time.monotonic()
    pushed, push_rss = run_measured("push", dataset_name, url, "--json", workspace=a)
    pulled, pull_rss = run_measured("pull", url, "--json", workspace=b)
    print(
        f"10k objects on {smart_server.backend}: push {pushed['seconds']} s ({push_rss // 1024} MiB), "
        f"pull {pulled['seconds']} s ({pull_rss // 1024} MiB), total {time.monotonic() - started:.1f} s"
    )
    assert pushed["objects_transferred"] == pulled["objects_transferred"] == 10_000
    assert pushed["blocks"] == pulled["blocks"] == 10_001
    assert push_rss < MAX_CLIENT_RSS_KIB and pull_rss < MAX_CLIENT_RSS_KIB
    assert len(list((b / "store" / dataset_name / "data").iterdir())) == 10_000
