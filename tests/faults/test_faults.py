"""Long fault runs (`make test-faults`): kill clients at many random points, kill and restart the
server mid-push, take S3 down mid-transfer, race many pushers. Every time both heads are valid chains,
nothing partial is visible, and re-running completes with only the missing work."""

from __future__ import annotations

import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from smart_transfer.storage.s3 import S3Store
from tests.conftest import (
    CLI,
    ROOT,
    S3Env,
    ServerProcess,
    backend_args,
    make_files,
    run_cli,
    start_server,
    summary,
)
from tests.integration.test_resume_and_expiry import log_of, remote_chain, remote_objects

pytestmark = pytest.mark.faults
#: Random kill points per flow and backend (two backends: 2 x 12 = 24 per flow).
KILL_POINTS = 12
SLOW = ["--limit-rate", "300K", "--parallel", "4"]


def kill_at(args: list[str], workspace: Path, seconds: float) -> int:
    process = subprocess.Popen(
        [*CLI, *args, "--workspace", str(workspace)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        return process.wait(seconds)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        return process.wait()


@pytest.mark.parametrize("flow", ["push", "pull"])
def test_clients_killed_at_random_points_leave_whole_heads(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, flow: str
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    url = f"{smart_server.url}/{dataset_name}"
    rng = random.Random(f"{flow}-{smart_server.backend}")
    mid_run = 0
    for point in range(KILL_POINTS):
        # fresh work at every point, so each kill can land mid-transfer
        run_cli(
            "add", dataset_name, *map(str, make_files(tmp_path / f"in{point}", 30, 16_384, f"p{point}")), workspace=a
        )
        if flow == "pull":
            summary(run_cli("push", dataset_name, url, "--json", workspace=a))
        before_remote = remote_chain(smart_server, dataset_name, tmp_path / f"r{point}")
        before_local = log_of(b, dataset_name)
        if flow == "push":
            code = kill_at(["push", dataset_name, url, *SLOW], a, rng.uniform(0.3, 1.8))
            after = remote_chain(smart_server, dataset_name, tmp_path / f"s{point}")
            assert after in (before_remote, log_of(a, dataset_name)), point
        else:
            code = kill_at(["pull", url, *SLOW], b, rng.uniform(0.3, 1.8))
            assert log_of(b, dataset_name) in (before_local, log_of(a, dataset_name)), point
        mid_run += code == -signal.SIGKILL
    assert mid_run >= KILL_POINTS // 2  # most kills really landed mid-run
    if flow == "push":
        summary(run_cli("push", dataset_name, url, "--json", workspace=a))
        assert remote_chain(smart_server, dataset_name, tmp_path / "final") == log_of(a, dataset_name)
    else:
        summary(run_cli("pull", url, "--json", workspace=b))
        assert log_of(b, dataset_name) == log_of(a, dataset_name)
    assert run_cli("verify", dataset_name, url, workspace=b if flow == "pull" else a).returncode == 0


def test_a_server_killed_mid_push_and_restarted_loses_nothing(
    request: pytest.FixtureRequest, tmp_path: Path, dataset_name: str
) -> None:
    for backend in ("local", "s3"):
        s3 = request.getfixturevalue("s3_env") if backend == "s3" else None
        args = backend_args(backend, s3)
        root = tmp_path / f"server-{backend}"
        server = start_server(root, *args)
        server.backend = backend
        a = tmp_path / f"a-{backend}"
        run_cli("add", dataset_name, *map(str, make_files(tmp_path / f"in-{backend}", 60, 16_384)), workspace=a)
        push = subprocess.Popen(
            [*CLI, "push", dataset_name, f"{server.url}/{dataset_name}", *SLOW, "--workspace", str(a), "--no-fallback"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and remote_objects(server, request, dataset_name) < 5:
            time.sleep(0.05)
        server.process.send_signal(signal.SIGKILL)
        server.process.wait()
        _, err = push.communicate(timeout=120)
        assert push.returncode == 1 and "Traceback" not in err
        restarted = start_server(root, *args)
        restarted.backend = backend
        try:
            assert remote_chain(restarted, dataset_name, tmp_path / f"c-{backend}") is None
            done = summary(run_cli("push", dataset_name, f"{restarted.url}/{dataset_name}", "--json", workspace=a))
            assert done["objects_skipped"] >= 5  # uploads from before the crash were not sent again
            assert remote_chain(restarted, dataset_name, tmp_path / f"d-{backend}") == log_of(a, dataset_name)
        finally:
            restarted.stop()


def test_an_s3_outage_mid_transfer_is_survived(
    private_s3: tuple[S3Env, Path], server_factory: object, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    s3, directory = private_s3
    server: ServerProcess = server_factory(*backend_args("s3", s3), env=s3.env)  # type: ignore[operator]
    server.backend = "s3"
    a = tmp_path / "a"
    name = "outage"
    run_cli("add", name, *map(str, make_files(tmp_path / "in", 60, 16_384)), workspace=a)
    push = subprocess.Popen(
        [*CLI, "push", name, f"{server.url}/{name}", *SLOW, "--workspace", str(a)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    prefix = next(str(x) for x in server.process.args if str(x).startswith("srv-"))  # type: ignore[union-attr]
    store = S3Store(s3.bucket, prefix, endpoint_url=s3.endpoint)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sum(1 for _ in store.list(f"{name}/data/")) < 5:
        time.sleep(0.05)
    store.close()
    script = str(ROOT / "scripts" / "s3-local.sh")
    subprocess.run(["bash", script, "stop-gateway", str(directory)], check=True)
    outage = threading.Timer(4.0, lambda: subprocess.run(["bash", script, "start-gateway", str(directory)], check=True))
    outage.start()
    _, err = push.communicate(timeout=300)
    outage.join()
    assert "Traceback" not in err
    # whatever the first attempt managed, the remote is old or new, and a re-run completes the work
    seen = remote_chain(server, name, tmp_path / "check")
    assert seen in (None, log_of(a, name))
    final = summary(run_cli("push", name, f"{server.url}/{name}", "--json", workspace=a))
    assert remote_chain(server, name, tmp_path / "final") == log_of(a, name)
    if push.returncode != 0:
        assert final["objects_skipped"] > 0


def test_many_concurrent_pushers_lose_no_update(smart_server: ServerProcess, dataset_name: str, tmp_path: Path) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    base = tmp_path / "base"
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "base-in", 1, 100)), workspace=base)
    summary(run_cli("push", dataset_name, url, "--json", workspace=base))
    pushers = [tmp_path / f"w{i}" for i in range(6)]
    for ws in pushers:
        summary(run_cli("pull", url, "--json", workspace=ws))
    history: list[list[dict[str, object]] | None] = []
    for round_number in range(3):
        for i, ws in enumerate(pushers):
            run_cli(
                "add",
                dataset_name,
                *map(str, make_files(tmp_path / f"r{round_number}-{i}", 3, 500, f"r{round_number}w{i}")),
                workspace=ws,
            )
        results: dict[int, subprocess.CompletedProcess[str]] = {}
        barrier = threading.Barrier(len(pushers))

        def push(
            i: int,
            barrier: threading.Barrier = barrier,
            results: dict[int, subprocess.CompletedProcess[str]] = results,
        ) -> None:
            barrier.wait()
            results[i] = run_cli("push", dataset_name, url, workspace=pushers[i])

        threads = [threading.Thread(target=push, args=(i,)) for i in range(len(pushers))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = [i for i, r in results.items() if r.returncode == 0]
        assert len(winners) == 1, [r.stderr for r in results.values()]
        for i, result in results.items():
            if i not in winners:
                assert result.returncode == 3 and "pull first" in result.stderr  # told why
        remote = remote_chain(smart_server, dataset_name, tmp_path / f"check{round_number}")
        assert remote == log_of(pushers[winners[0]], dataset_name)
        assert remote is not None and (not history or history[-1] == remote[len(remote) - len(history[-1]) :])
        history.append(remote)
        for i, ws in enumerate(pushers):  # losers take the winner's history and try again next round
            if i not in winners:
                summary(run_cli("pull", url, "--force", "--json", workspace=ws))
