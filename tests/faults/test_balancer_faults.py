"""The long balancer runs: a push lasting several times nginx's proxy_read_timeout lives on keep-alives
(and, as a control, is cut without them), and SIGTERM of the replica serving a session ends that
session cleanly while the re-run through the balancer completes on the other replica."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import (
    CLI,
    S3Env,
    ServerProcess,
    backend_args,
    make_files,
    run_cli,
    start_balancer,
    start_replicas,
    summary,
)
from tests.integration.test_operations import metrics_of, sample
from tests.integration.test_resume_and_expiry import log_of, remote_chain

pytestmark = pytest.mark.faults
#: nginx's proxy_read_timeout in these runs, seconds.
PROXY_READ_TIMEOUT = 2.0


def _push(name: str, url: str, workspace: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, "push", name, url, "--limit-rate", "80K", "--parallel", "2", *extra, "--workspace", str(workspace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_push_lasting_many_proxy_read_timeouts_lives_on_keep_alives(
    s3_env: S3Env, tmp_path: Path, dataset_name: str
) -> None:
    store = backend_args("s3", s3_env)
    alive = start_replicas(tmp_path / "alive", 2, *store, "--keepalive-interval", "0.5")
    quiet = start_replicas(tmp_path / "quiet", 1, *store, "--keepalive-interval", "30")
    balancers = [start_balancer(tmp_path / "lb-alive", alive), start_balancer(tmp_path / "lb-quiet", quiet)]
    try:
        a = tmp_path / "a"
        run_cli("add", dataset_name, *map(str, make_files(tmp_path / "in", 40, 16_384)), workspace=a)
        started = time.monotonic()
        push = _push(dataset_name, f"{balancers[0].url}/{dataset_name}", a, "--keepalive-interval", "0.5", "--json")
        out, err = push.communicate(timeout=120)
        seconds = time.monotonic() - started
        assert push.returncode == 0, err
        assert orjson.loads(out)["objects_transferred"] == 40
        assert seconds > 3 * PROXY_READ_TIMEOUT, seconds  # it really outlasted the proxy's timeout
        # the control: a push with keep-alives rarer than the proxy's timeout is cut. Its two objects take
        # one URL negotiation (URLs are signed just before use, so a push of many small objects keeps
        # talking to the server), then ~10 s of uploads in which only keep-alives could cross the proxy
        run_cli("add", dataset_name, *map(str, make_files(tmp_path / "in2", 2, 400_000, "q")), workspace=a)
        before = log_of(a, dataset_name)
        cut = _push(dataset_name, f"{balancers[1].url}/{dataset_name}", a, "--keepalive-interval", "30")
        _, err = cut.communicate(timeout=120)
        assert cut.returncode == 1 and "closed the session" in err, err
        assert before is not None  # newest first: the remote still ends 2 blocks earlier
        assert remote_chain(alive[0], dataset_name, tmp_path / "check") == before[2:]
    finally:
        for balancer in balancers:
            balancer.stop()
        for replica in alive + quiet:
            replica.stop()


def test_sigterm_of_the_replica_serving_a_session_ends_it_cleanly_and_the_rerun_goes_elsewhere(
    s3_env: S3Env, tmp_path: Path, dataset_name: str
) -> None:
    replicas = start_replicas(
        tmp_path, 2, *backend_args("s3", s3_env), "--keepalive-interval", "0.5", "--shutdown-grace", "1"
    )
    balancer = start_balancer(tmp_path / "lb", replicas)
    try:
        a = tmp_path / "a"
        run_cli("add", dataset_name, *map(str, make_files(tmp_path / "in", 40, 16_384)), workspace=a)
        push = _push(dataset_name, f"{balancer.url}/{dataset_name}", a, "--keepalive-interval", "0.5")
        serving: list[ServerProcess] = []
        deadline = time.monotonic() + 30
        while not serving and time.monotonic() < deadline:
            serving = [r for r in replicas if sample(metrics_of(r), "smart_transfer_sessions_active", flow="push")]
            time.sleep(0.05)
        victim, other = serving[0], next(r for r in replicas if r is not serving[0])
        victim.process.send_signal(signal.SIGTERM)
        _, err = push.communicate(timeout=60)
        assert push.returncode == 1 and "ShuttingDown" in err, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert victim.process.wait(30) == 0
        assert remote_chain(other, dataset_name, tmp_path / "check") is None  # nothing half-visible
        done = summary(run_cli("push", dataset_name, f"{balancer.url}/{dataset_name}", "--json", workspace=a))
        assert done["objects_skipped"] > 0  # resumed, on the replica still running
        assert remote_chain(other, dataset_name, tmp_path / "final") == log_of(a, dataset_name)
    finally:
        balancer.stop()
        for replica in replicas:
            replica.stop()
