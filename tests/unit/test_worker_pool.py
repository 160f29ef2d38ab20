"""The server's worker pool knows how long its oldest queued call has waited, and forgets a call once a
thread takes it (what the overload guard reads)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from typing import Annotated

from fastapi import FastAPI, Query
from fastapi.responses import StreamingResponse
from fastapi.testclient import TestClient

from smart_transfer.server.workers import WorkerPool, iterate_on_workers, on_workers


def test_the_oldest_wait_grows_while_every_thread_is_held_and_ends_when_the_queue_drains() -> None:
    pool = WorkerPool(2)
    release = threading.Event()
    try:
        assert pool.oldest_wait() == 0.0 and pool.queued == 0
        held = [pool.submit(release.wait, 30) for _ in range(2)]
        _wait_for_threads(pool)
        assert pool.queued == 0 and pool.oldest_wait() == 0.0
        waiting = pool.submit(lambda: "ran")
        time.sleep(0.3)
        assert pool.queued == 1 and pool.oldest_wait() >= 0.25
        release.set()
        assert waiting.result(timeout=10) == "ran" and all(future.result(timeout=10) for future in held)
        assert pool.queued == 0 and pool.oldest_wait() == 0.0
    finally:
        release.set()
        pool.shutdown(wait=True)


def test_a_call_refused_by_a_closed_pool_is_not_counted_as_waiting() -> None:
    pool = WorkerPool(2)
    pool.shutdown(wait=True)
    try:
        pool.submit(time.sleep, 0)
    except RuntimeError:
        pass
    else:
        raise AssertionError("a shut-down pool took a call")
    assert pool.queued == 0 and pool.oldest_wait() == 0.0


def test_a_queued_call_cancelled_before_a_thread_takes_it_stops_counting_as_waiting() -> None:
    """A cancelled asyncio.to_thread cancels its queued call, which no thread then starts: were it still
    counted, the server would refuse every request as busy from then on."""
    pool = WorkerPool(2)
    release = threading.Event()
    try:
        held = [pool.submit(release.wait, 30) for _ in range(2)]
        _wait_for_threads(pool)
        queued = pool.submit(lambda: "never")
        assert pool.queued == 1
        assert queued.cancel()
        assert pool.queued == 0 and pool.oldest_wait() == 0.0
        release.set()
        assert all(future.result(timeout=10) for future in held)
    finally:
        release.set()
        pool.shutdown(wait=True)


def _wait_for_threads(pool: WorkerPool) -> None:
    """Until every call submitted so far is taken by a thread."""
    deadline = time.monotonic() + 10
    while pool.queued and time.monotonic() < deadline:
        time.sleep(0.01)


def test_stop_cancels_queued_calls_and_waits_a_bounded_time_for_running_ones() -> None:
    """A stopping server must not run the calls still queued (Python's shutdown would, against a store
    that may have stopped answering) nor wait without a bound for the running ones."""
    pool = WorkerPool(2)
    release = threading.Event()
    ran = threading.Event()
    try:
        held = [pool.submit(release.wait, 30) for _ in range(2)]
        _wait_for_threads(pool)
        queued = pool.submit(ran.set)
        started = time.monotonic()
        assert pool.stop(0.5) == 2  # both held threads still running when the bound ends
        assert 0.4 < time.monotonic() - started < 5
        assert queued.cancelled() and pool.queued == 0
        release.set()
        assert all(future.result(timeout=10) for future in held)
        assert pool.stop(5) == 0 and not ran.is_set()
    finally:
        release.set()
        pool.shutdown(wait=True)


def _app_on_a_pool() -> FastAPI:
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        pool = WorkerPool(2)
        asyncio.get_running_loop().set_default_executor(pool)  # as the server's app does
        yield
        pool.stop(5)

    app = FastAPI(lifespan=lifespan)

    @app.get("/tables/{name}")
    @on_workers
    def table(name: str, limit: Annotated[int, Query(le=10)] = 1) -> dict[str, object]:
        return {"thread": threading.current_thread().name, "name": name, "limit": limit}

    @app.get("/lines")
    async def lines() -> StreamingResponse:
        def made() -> Iterator[bytes]:
            for _ in range(3):
                yield threading.current_thread().name.encode() + b"\n"

        return StreamingResponse(iterate_on_workers(made()))

    return app


def test_a_blocking_route_and_a_streamed_answer_run_on_the_worker_pool() -> None:
    """Not on Starlette's own thread pool, whose queue the overload guard does not see; the route keeps
    its declared parameters (types and bounds read from this module's annotations)."""
    with TestClient(_app_on_a_pool()) as client:
        body = client.get("/tables/abc", params={"limit": 3}).json()
        refused = client.get("/tables/abc", params={"limit": 11})
        streamed = client.get("/lines").text.splitlines()
    assert body["thread"].startswith("smart-transfer-worker") and body["name"] == "abc" and body["limit"] == 3
    assert refused.status_code == 422
    assert len(streamed) == 3 and all(name.startswith("smart-transfer-worker") for name in streamed), streamed


def test_a_streamed_answer_whose_client_went_away_waits_for_the_chunk_being_made_then_closes() -> None:
    """The request (and its slot) must not end while a worker thread still makes its chunk; the chunks'
    generator is closed afterwards, so its clean-up runs."""

    async def scenario() -> tuple[bool, bool, bool]:
        pool = WorkerPool(2)
        asyncio.get_running_loop().set_default_executor(pool)
        making, release, closed = threading.Event(), threading.Event(), threading.Event()

        def made() -> Iterator[bytes]:
            try:
                yield b"first"
                making.set()
                release.wait(10)
                yield b"second"
            finally:
                closed.set()

        stream = iterate_on_workers(made())
        assert await anext(stream) == b"first"
        consumer = asyncio.ensure_future(anext(stream))
        await asyncio.to_thread(making.wait, 10)
        consumer.cancel()  # the client went away
        await asyncio.sleep(0.3)
        waited = not consumer.done()
        release.set()
        with suppress(asyncio.CancelledError):
            await consumer
        pool.stop(5)
        return waited, consumer.cancelled(), closed.is_set()

    assert asyncio.run(scenario()) == (True, True, True)
