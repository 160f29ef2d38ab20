"""Admission against a real server process: static caps hold however long sessions last; the adaptive
session limit's pace (sessions far longer than their usual) shrinks it, and the excess gets Busy; /metrics
says so. (The adaptive limit the store's latency steers is tested against a slowed real S3 in
tests/faults/test_admission_slow_store.py.) No speed is asserted: only what the server answers and
reports."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any

import httpx
import orjson
from websockets.exceptions import ConnectionClosed

from tests.conftest import ServerProcess, make_files, run_cli
from tests.integration.test_operations import metrics_of, sample
from tests.integration.test_security import error_of, ws

CAP = 8
#: Quick sessions, then sessions held open, HELD_AT_ONCE at a time for HOLD_SECONDS.
QUICK_SESSIONS = 30
HOLD_SECONDS = 0.6
HELD_AT_ONCE = 4


def quick_sessions(server: ServerProcess, count: int) -> None:
    for _ in range(count):
        with ws(server, "/quick/pull") as connection:
            connection.close()


def test_static_admission_keeps_the_cap_however_long_sessions_last(server_factory: Any) -> None:
    server: ServerProcess = server_factory("--admission", "static", "--max-sessions", str(CAP))
    quick_sessions(server, QUICK_SESSIONS)
    with ExitStack() as stack:
        for _ in range(HELD_AT_ONCE):
            stack.enter_context(ws(server, "/slow/pull"))
        time.sleep(HOLD_SECONDS)
    values = metrics_of(server)
    assert sample(values, "smart_transfer_admission_limit", limit="sessions") == CAP
    assert sample(values, "smart_transfer_admission_refusals_total", limit="sessions") == 0
    assert ("smart_transfer_admission_latency_ratio", (("limit", "sessions"),)) not in values


#: The pace alone steers the session limit here: the store's tolerance and the server's delay are out of
#: reach, a short interval and full smoothing make it react within a few sessions, no queue.
PACED = [
    *("--max-sessions", str(CAP), "--admission-min", "1", "--admission-interval", "0.2"),
    *("--admission-smoothing", "1", "--admission-pace-tolerance", "3", "--admission-tolerance", "100"),
    *("--admission-delay-target", "0", "--admission-queue-wait", "0", "--busy-retry-after", "3"),
]
#: Whole pulls that make the usual (more than the limiter's warm-up of 20 per kind), then pulls whose
#: client takes this long before it says it is done, this many at once, for at most this many rounds.
USUAL_PULLS = 30
SLOW_CLIENT_SECONDS = 0.4
SLOW_AT_ONCE = 4
MAX_ROUNDS = 10


def whole_pull(server: ServerProcess, dataset: str, hold: float = 0.0) -> None:
    """A pull session to its normal end, as a client written from the protocol documents: the request,
    the answer, ``hold`` seconds of the client's own, then DatasetPullComplete; the server closes."""
    with ws(server, f"/{dataset}/pull") as connection:
        connection.send('{"type": "DatasetPullRequest"}')
        assert orjson.loads(connection.recv(timeout=10))["type"] == "DatasetPullResponse"
        time.sleep(hold)
        connection.send('{"type": "DatasetPullComplete"}')
        with suppress(ConnectionClosed):
            connection.recv(timeout=10)


def test_sessions_far_slower_than_usual_shrink_the_session_limit_and_the_excess_gets_busy(
    server_factory: Any, tmp_path: Path
) -> None:
    server: ServerProcess = server_factory(*PACED)
    workspace = tmp_path / "ws"
    assert run_cli("add", "paced", *map(str, make_files(tmp_path / "in", 1, 100)), workspace=workspace).returncode == 0
    assert run_cli("push", "paced", f"{server.url}/paced", workspace=workspace).returncode == 0
    for _ in range(USUAL_PULLS):
        whole_pull(server, "paced")
        assert httpx.get(f"{server.url}/paced/refs/head", timeout=30).status_code == 200
    values = metrics_of(server)
    assert sample(values, "smart_transfer_admission_limit", limit="sessions") == CAP
    route = "GET /{dataset}/refs/head"  # requests are timed by method and route, not by path
    assert sample(values, "smart_transfer_admission_pace_baseline_seconds", limit="requests", kind=route) > 0
    with ThreadPoolExecutor(SLOW_AT_ONCE) as pool:
        for _ in range(MAX_ROUNDS):
            list(pool.map(lambda _: whole_pull(server, "paced", SLOW_CLIENT_SECONDS), range(SLOW_AT_ONCE)))
            if sample(metrics_of(server), "smart_transfer_admission_limit", limit="sessions") < SLOW_AT_ONCE:
                break
    values = metrics_of(server)
    limit = int(sample(values, "smart_transfer_admission_limit", limit="sessions"))
    assert 1 <= limit < SLOW_AT_ONCE
    assert sample(values, "smart_transfer_admission_pace_limit", limit="sessions") == limit
    assert sample(values, "smart_transfer_admission_pace_ratio", limit="sessions") > 3
    assert sample(values, "smart_transfer_admission_latency_ratio", limit="sessions") < 100  # not the store
    cap = sample(values, "smart_transfer_admission_cap", limit="requests")
    assert sample(values, "smart_transfer_admission_pace_limit", limit="requests") == cap  # requests as usual
    with ExitStack() as stack:
        for _ in range(limit):
            stack.enter_context(ws(server, "/paced/pull"))
        time.sleep(HOLD_SECONDS)  # admitted: each holds its slot
        with ws(server, "/paced/pull") as refused:
            error = error_of(refused)
    assert error["code"] == "Busy" and error["details"] == {"retry_after": 3}
    assert f"adaptive limit {limit} of {CAP}" in error["message"]
