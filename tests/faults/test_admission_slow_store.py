"""Adaptive admission against a real server process on the real S3, through the fault proxy: when the
store starts answering the server's own calls far later than it usually does (a saturated store), both
limits shrink below their caps, the excess gets the documented Busy with its retry hint, and /metrics shows
the limit, what is in flight, the refusals and the latencies it saw. No speed is asserted: only what the
server answers and reports."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from tests.conftest import S3Env, ServerProcess, start_server
from tests.faults.proxy import Proxy, Rule
from tests.integration.test_operations import metrics_of, sample, wait_until
from tests.integration.test_security import error_of, ws

CAP = 8
#: Settings that make the limiter react within a few slow calls: a short interval, full smoothing, a
#: small tolerance; the server's own delay is not watched here (only the store's latency is under test).
ADAPTIVE = [
    *("--max-sessions", str(CAP), "--admission-min", "1", "--admission-interval", "0.2"),
    *("--admission-smoothing", "1", "--admission-tolerance", "1.5", "--busy-retry-after", "3"),
    *("--admission-delay-target", "0", "--admission-queue-wait", "0.2"),
]
#: Quick reads that make the usual latency (more than the limiter's warm-up of 20 samples per kind).
QUICK_READS = 40
#: Slow reads made at once per round, and rounds before the test gives up on the limit shrinking.
AT_ONCE = 4
MAX_ROUNDS = 10


@pytest.fixture
def server(s3_env: S3Env, tmp_path: Path) -> Iterator[tuple[ServerProcess, Proxy]]:
    proxy = Proxy(s3_env.endpoint)
    prefix = f"srv-{secrets.token_hex(6)}"
    process = start_server(
        tmp_path / "server",
        *("--s3-endpoint", proxy.url, "--s3-bucket", s3_env.bucket, "--s3-prefix", prefix),
        *ADAPTIVE,
    )
    try:
        yield process, proxy
    finally:
        process.stop()
        proxy.stop()


def read_head(server: ServerProcess) -> None:
    """One REST read of a head: one store call (the LIST of the reference's newest record)."""
    answer = httpx.get(f"{server.url}/quiet/refs/head", timeout=30)
    assert answer.status_code in (404, 429), answer.text


def limit_of(server: ServerProcess, which: str) -> float:
    return sample(metrics_of(server), "smart_transfer_admission_limit", limit=which)


def test_a_store_answering_far_later_than_usual_shrinks_both_limits_and_the_excess_gets_busy(
    server: tuple[ServerProcess, Proxy],
) -> None:
    process, proxy = server
    assert limit_of(process, "sessions") == CAP
    for _ in range(QUICK_READS):
        read_head(process)
    assert limit_of(process, "sessions") == CAP  # as usual: the cap
    proxy.set_rules(Rule("slow", "GET"))  # every LIST and GET of the store, from now on
    with ThreadPoolExecutor(AT_ONCE) as pool:
        for _ in range(MAX_ROUNDS):
            list(pool.map(lambda _: read_head(process), range(AT_ONCE * 2)))
            if limit_of(process, "sessions") < AT_ONCE:
                break
    limit = int(limit_of(process, "sessions"))
    assert 1 <= limit < AT_ONCE
    assert limit_of(process, "requests") < 256
    with ExitStack() as stack:
        for _ in range(limit):
            stack.enter_context(ws(process, "/held/pull"))
        wait_until(lambda: sample(metrics_of(process), "smart_transfer_admission_in_flight", limit="sessions") == limit)
        with ws(process, "/excess/pull") as excess:
            error = error_of(excess)
    assert error["code"] == "Busy" and error["details"] == {"retry_after": 3}
    assert f"adaptive limit {limit} of {CAP}" in error["message"]
    after = metrics_of(process)
    assert sample(after, "smart_transfer_admission_refusals_total", limit="sessions") >= 1
    assert sample(after, "smart_transfer_busy_answers_total", limit="sessions") >= 1
    assert sample(after, "smart_transfer_admission_latency_ratio", limit="sessions") > 1.5
    assert sample(after, "smart_transfer_admission_baseline_seconds", limit="sessions", kind="ListObjectsV2.ref") > 0
