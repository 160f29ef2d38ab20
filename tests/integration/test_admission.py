"""Static admission against a real server process: the caps hold however long sessions last, and /metrics
says so. (The adaptive limit, which the store's latency steers, is tested against a slowed real S3 in
tests/faults/test_admission_slow_store.py.) No speed is asserted: only what the server answers and
reports."""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Any

from tests.conftest import ServerProcess
from tests.integration.test_operations import metrics_of, sample
from tests.integration.test_security import ws

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
