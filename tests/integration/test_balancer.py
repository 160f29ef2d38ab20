"""Two server replicas on one S3 bucket behind a real nginx (WebSocket upgrade, a short
proxy_read_timeout): they act as one server. The long runs (a push lasting many proxy timeouts,
SIGTERM of a replica mid-session) are in tests/faults/test_balancer_faults.py."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import (
    Balancer,
    S3Env,
    ServerProcess,
    backend_args,
    make_files,
    run_cli,
    start_balancer,
    start_replicas,
    summary,
)
from tests.integration.test_resume_and_expiry import log_of


@pytest.fixture(scope="module")
def balanced(s3_env: S3Env, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Balancer, list[ServerProcess]]]:
    root = tmp_path_factory.mktemp("balanced")
    replicas = start_replicas(root, 2, *backend_args("s3", s3_env), "--keepalive-interval", "0.5")
    # nginx's read timeout well above the keep-alive interval: what these tests race is the push's commit,
    # and on a loaded machine a replica can be busy for more than the 2 s default between two frames (the
    # keep-alives beating a short timeout are the fault runs' test, test_balancer_faults.py)
    balancer = start_balancer(root / "nginx", replicas, read_timeout="10s")
    yield balancer, replicas
    balancer.stop()
    for replica in replicas:
        replica.stop()


def test_push_through_the_balancer_and_pull_from_each_replica(
    balanced: tuple[Balancer, list[ServerProcess]], tmp_path: Path, dataset_name: str
) -> None:
    balancer, replicas = balanced
    a = tmp_path / "a"
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "in", 5, 2000)), workspace=a)
    pushed = summary(run_cli("push", dataset_name, f"{balancer.url}/{dataset_name}", "--json", workspace=a))
    assert pushed["objects_transferred"] == 5
    for index, replica in enumerate(replicas):
        pulled = summary(run_cli("pull", f"{replica.url}/{dataset_name}", "--json", workspace=tmp_path / f"b{index}"))
        assert pulled["new_head"] == pushed["new_head"]
        assert log_of(tmp_path / f"b{index}", dataset_name) == log_of(a, dataset_name)
    # and the other way round: a push to one replica is what the balancer serves
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "more", 1, 2000, "m")), workspace=tmp_path / "b0")
    summary(run_cli("push", dataset_name, f"{replicas[0].url}/{dataset_name}", "--json", workspace=tmp_path / "b0"))
    summary(run_cli("pull", f"{balancer.url}/{dataset_name}", "--json", workspace=a))
    assert log_of(a, dataset_name) == log_of(tmp_path / "b0", dataset_name)


def test_racing_pushes_through_the_balancer_have_one_winner(
    balanced: tuple[Balancer, list[ServerProcess]], tmp_path: Path, dataset_name: str
) -> None:
    balancer, _ = balanced
    url = f"{balancer.url}/{dataset_name}"
    base = tmp_path / "base"
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "base-in", 1, 100)), workspace=base)
    summary(run_cli("push", dataset_name, url, "--json", workspace=base))
    pushers = [tmp_path / f"w{i}" for i in range(4)]
    for i, workspace in enumerate(pushers):
        summary(run_cli("pull", url, "--json", workspace=workspace))
        run_cli("add", dataset_name, *map(str, make_files(tmp_path / f"in{i}", 2, 500, f"w{i}")), workspace=workspace)
    results: dict[int, subprocess.CompletedProcess[str]] = {}
    barrier = threading.Barrier(len(pushers))

    def push(i: int) -> None:
        barrier.wait()
        results[i] = run_cli("push", dataset_name, url, workspace=pushers[i])

    threads = [threading.Thread(target=push, args=(i,)) for i in range(len(pushers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [i for i, result in results.items() if result.returncode == 0]
    assert len(winners) == 1, [r.stderr for r in results.values()]
    for i, result in results.items():
        if i != winners[0]:  # told to pull and retry, never to force
            assert result.returncode == 3 and "pull first, then push again" in result.stderr, result.stderr
    summary(run_cli("pull", url, "--json", workspace=tmp_path / "check"))
    assert log_of(tmp_path / "check", dataset_name) == log_of(pushers[winners[0]], dataset_name)
