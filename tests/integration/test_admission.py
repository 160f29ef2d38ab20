"""Adaptive admission against a real server process: when admitted sessions start lasting far longer than
they usually do, the session limit shrinks below its cap, the excess gets the documented Busy with its
retry hint at once, and /metrics shows the limit, what is in flight, the refusals and the latency it saw.
No speed is asserted: only what the server answers and reports."""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Any

from tests.conftest import ServerProcess
from tests.integration.test_operations import metrics_of, sample, wait_until
from tests.integration.test_security import error_of, ws

CAP = 8
#: Settings that make the limiter react within a few held sessions: a short interval, full smoothing,
#: a small tolerance and a baseline made of the first quick sessions.
ADAPTIVE = [
    "--max-sessions",
    str(CAP),
    "--admission-min",
    "1",
    "--admission-interval",
    "0.2",
    "--admission-smoothing",
    "1",
    "--admission-tolerance",
    "1.5",
    "--busy-retry-after",
    "3",
]
#: Quick sessions that make the usual duration (more than the limiter's warm-up).
QUICK_SESSIONS = 30
#: How long each slow session is held open, and how many are held at once per round.
HOLD_SECONDS = 0.6
HELD_AT_ONCE = 4
#: Rounds of slow sessions before the test gives up on the limit shrinking.
MAX_ROUNDS = 10


def session_limit(server: ServerProcess) -> float:
    return sample(metrics_of(server), "smart_transfer_admission_limit", limit="sessions")


def quick_sessions(server: ServerProcess, count: int) -> None:
    for _ in range(count):
        with ws(server, "/quick/pull") as connection:
            connection.close()


def slow_round(server: ServerProcess) -> None:
    """HELD_AT_ONCE sessions admitted together and held HOLD_SECONDS."""
    with ExitStack() as stack:
        for _ in range(HELD_AT_ONCE):
            stack.enter_context(ws(server, "/slow/pull"))
        time.sleep(HOLD_SECONDS)
    wait_until(lambda: sample(metrics_of(server), "smart_transfer_admission_in_flight", limit="sessions") == 0)


def test_sessions_lasting_far_longer_than_usual_shrink_the_limit_and_the_excess_gets_busy(
    server_factory: Any,
) -> None:
    server: ServerProcess = server_factory(*ADAPTIVE)
    assert session_limit(server) == CAP
    quick_sessions(server, QUICK_SESSIONS)
    assert session_limit(server) == CAP  # as usual: the cap
    for _ in range(MAX_ROUNDS):
        slow_round(server)
        if session_limit(server) < HELD_AT_ONCE:
            break
    limit = int(session_limit(server))
    assert 1 <= limit < HELD_AT_ONCE
    with ExitStack() as stack:
        for _ in range(limit):
            stack.enter_context(ws(server, "/held/pull"))
        wait_until(lambda: sample(metrics_of(server), "smart_transfer_admission_in_flight", limit="sessions") == limit)
        with ws(server, "/excess/pull") as excess:
            error = error_of(excess)
    assert error["code"] == "Busy" and error["details"] == {"retry_after": 3}
    assert f"adaptive limit {limit} of {CAP}" in error["message"]
    after = metrics_of(server)
    assert sample(after, "smart_transfer_admission_refusals_total", limit="sessions") >= 1
    assert sample(after, "smart_transfer_busy_answers_total", limit="sessions") >= 1
    assert sample(after, "smart_transfer_admission_cap", limit="sessions") == CAP
    assert sample(after, "smart_transfer_admission_latency_ratio", limit="sessions") > 1.5
    assert sample(after, "smart_transfer_admission_baseline_seconds", limit="sessions", kind="read") > 0
    assert sample(after, "smart_transfer_admission_limit", limit="requests") > 0


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
