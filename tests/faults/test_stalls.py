"""A store that stops answering (its gateway paused by SIGSTOP: connections are accepted, nothing is
answered) mid-push and mid-pull, with the default bounds: the client fails with one clear line
within the documented bound, nothing half-done is visible, the server's own store calls and its
readiness say so too, and after SIGCONT a re-run completes, resuming."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from smart_transfer.storage.s3 import S3Store
from smart_transfer.transfer.limits import Timeouts
from tests.conftest import CLI, S3Env, ServerProcess, backend_args, make_files, run_cli, summary
from tests.faults.conftest import gateway_paused
from tests.integration.test_resume_and_expiry import log_of, remote_chain
from tests.integration.test_security import error_of, ws

pytestmark = pytest.mark.faults
SLOW = ["--limit-rate", "300K", "--parallel", "4"]
#: What the client promises with its default settings (README: about 46 s), plus process start-up.
CLIENT_BOUND = Timeouts().stall_bound() + 5
#: The server's own S3 calls with the defaults: 3 attempts of at most 5 + 10 s, with backoff.
SERVER_BOUND = 3 * (5 + 10) + 5


def _wait(condition: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def _server_on(s3: S3Env, server_factory: Any) -> tuple[ServerProcess, S3Store]:
    server: ServerProcess = server_factory(*backend_args("s3", s3), env=s3.env)
    server.backend = "s3"
    prefix = next(str(x) for x in server.process.args if str(x).startswith("srv-"))  # type: ignore[union-attr]
    return server, S3Store(s3.bucket, prefix, endpoint_url=s3.endpoint)


class Timed:
    """A request to the server made while the store is paused, on a thread: status, body, seconds."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.result: tuple[int, dict[str, Any], float] | None = None
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self) -> None:
        started = time.monotonic()
        answer = httpx.get(self.url, timeout=120)
        self.result = (answer.status_code, answer.json(), time.monotonic() - started)


def test_a_store_that_stops_answering_mid_push_fails_it_in_time_and_a_rerun_resumes(
    private_s3: tuple[S3Env, Path], server_factory: Any, tmp_path: Path
) -> None:
    s3, directory = private_s3
    server, store = _server_on(s3, server_factory)
    name, a = "stalled-push", tmp_path / "a"
    run_cli("add", name, *map(str, make_files(tmp_path / "in", 60, 16_384)), workspace=a)
    push = subprocess.Popen(
        [*CLI, "push", name, f"{server.url}/{name}", *SLOW, "--workspace", str(a)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait(lambda: sum(1 for _ in store.list(f"{name}/data/")) >= 5)
    with gateway_paused(directory):
        started = time.monotonic()
        listing = Timed(f"{server.url}/")  # the server's own S3 calls are bounded too
        ready = httpx.get(f"{server.url}/readyz", timeout=30)
        assert ready.status_code == 503 and "stopped answering" in ready.json()["checks"]["store"], ready.text
        _, err = push.communicate(timeout=300)
        client_seconds = time.monotonic() - started
        listing.thread.join(300)
    print(f"stalled push reported after {client_seconds:.1f} s; the server's own call after {listing.result}")
    assert push.returncode == 1
    line = _one_line(err)
    assert "storage stopped answering" in line and "falling back" not in err, line
    assert client_seconds < CLIENT_BOUND
    assert listing.result is not None
    status, body, server_seconds = listing.result
    assert status == 503 and body["error"]["code"] == "StorageUnavailable", body
    assert "storage stopped answering" in body["error"]["message"] and server_seconds < SERVER_BOUND
    _wait(lambda: httpx.get(f"{server.url}/readyz", timeout=30).status_code == 200)
    assert remote_chain(server, name, tmp_path / "check") is None  # the head never moved
    done = summary(run_cli("push", name, f"{server.url}/{name}", "--json", workspace=a))
    assert done["objects_skipped"] >= 5  # uploads from before the stall were not sent again
    assert remote_chain(server, name, tmp_path / "final") == log_of(a, name)
    store.close()


def test_a_store_that_stops_answering_mid_pull_fails_it_in_time_and_a_rerun_resumes(
    private_s3: tuple[S3Env, Path], server_factory: Any, tmp_path: Path
) -> None:
    s3, directory = private_s3
    server, store = _server_on(s3, server_factory)
    store.close()
    name, a, b = "stalled-pull", tmp_path / "a", tmp_path / "b"
    run_cli("add", name, *map(str, make_files(tmp_path / "in", 60, 16_384)), workspace=a)
    summary(run_cli("push", name, f"{server.url}/{name}", "--json", workspace=a))
    pull = subprocess.Popen(
        [*CLI, "pull", f"{server.url}/{name}", *SLOW, "--workspace", str(b)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait(lambda: len(list((b / "store" / name / "data").glob("*"))) >= 5)
    with gateway_paused(directory):
        started = time.monotonic()
        _, err = pull.communicate(timeout=300)
        client_seconds = time.monotonic() - started
    print(f"stalled pull reported after {client_seconds:.1f} s")
    assert pull.returncode == 1
    line = _one_line(err)
    assert "storage stopped answering" in line and "falling back" not in err, line
    assert client_seconds < CLIENT_BOUND
    assert log_of(b, name) is None  # nothing visible: the local head never moved
    done = summary(run_cli("pull", f"{server.url}/{name}", "--json", workspace=b))
    assert done["objects_skipped"] >= 5
    assert log_of(b, name) == log_of(a, name)


def test_a_server_whose_store_stalls_refuses_new_work_as_busy_instead_of_queueing_it(
    private_s3: tuple[S3Env, Path], server_factory: Any
) -> None:
    """Two worker threads, both held by listings the paused store does not answer, and a third listing
    queued behind them: once it has waited longer than --max-queue-wait, new requests get the documented
    429 + Retry-After at once (not a wait for the store's own timeouts), and sessions the Busy error;
    /readyz says not ready within its timeout (its checks wait behind the held threads); when the store
    answers again the queue drains and requests are served."""
    s3, directory = private_s3
    server: ServerProcess = server_factory(
        *backend_args("s3", s3), "--worker-threads", "2", "--max-queue-wait", "0.5", "--ready-timeout", "1", env=s3.env
    )
    assert httpx.get(f"{server.url}/", timeout=30).status_code == 200
    with gateway_paused(directory):
        held = [Timed(f"{server.url}/") for _ in range(3)]
        time.sleep(1.5)  # the third listing has now waited more than 0.5 s for a thread
        started = time.monotonic()
        refused = httpx.get(f"{server.url}/", timeout=30)
        refused_seconds = time.monotonic() - started
        with ws(server, "/anything/pull") as session:
            session_error = error_of(session)
        page = httpx.get(f"{server.url}/ui", timeout=30)  # the web view says it as a page, with the header
        during = httpx.get(f"{server.url}/metrics", timeout=30).text  # a scrape is never refused
        started = time.monotonic()
        readiness = httpx.get(f"{server.url}/readyz", timeout=30)  # its checks wait behind the held threads
        readiness_seconds = time.monotonic() - started
    for request in held:
        request.thread.join(300)
    assert refused.status_code == 429 and refused.headers["retry-after"] == "2", refused.text
    error = refused.json()["error"]
    assert error["code"] == "Busy" and "waited" in error["message"] and "thread" in error["message"], error
    assert refused_seconds < 5  # refused at the door, not after the store's timeouts
    assert session_error["code"] == "Busy" and "waited" in session_error["message"], session_error
    assert page.status_code == 429 and page.headers["retry-after"] == "2" and "waited" in page.text, page.text
    assert all(request.result is not None for request in held)  # the admitted ones ended (served or 503)
    checks = readiness.json()["checks"]
    assert readiness.status_code == 503 and readiness_seconds < 10, (readiness_seconds, checks)  # not a hang
    assert "no answer within 1 s" in checks["index"] and "no answer within 1 s" in checks["store"], checks
    _wait(lambda: httpx.get(f"{server.url}/", timeout=30).status_code == 200)
    metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
    assert 'smart_transfer_busy_answers_total{limit="queue"}' in metrics, metrics
    queued = re.search(r"^smart_transfer_worker_queue ([0-9.]+)$", during, re.M)
    oldest = re.search(r"^smart_transfer_worker_queue_oldest_seconds ([0-9.]+)$", during, re.M)
    assert queued and float(queued.group(1)) >= 1 and oldest and float(oldest.group(1)) > 0.5, during
    assert "smart_transfer_worker_queue 0.0" in metrics and "smart_transfer_worker_queue_oldest_seconds 0.0" in metrics
