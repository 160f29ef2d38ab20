"""The threads that run the server's blocking work (store calls through boto3, the RocksDB index, packing
blocks), and how long that work waits for one.

Every ``asyncio.to_thread`` of the server lands here: the pool is installed as the event loop's default
executor when the server starts. Python's own default has ``cpu_count + 4`` threads, six on a 2-core
machine, which a slow store fills at once: under 200 clients on S3 a session's store calls queued for
tens of seconds while the process sat at half a core. The pool is sized by ``--worker-threads``, and it
knows how long its oldest queued call has waited, so that the request guard can refuse new work with the
documented Busy / 429 (``--max-queue-wait``) before the queue makes every admitted request late."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import count
from typing import Any, ParamSpec, TypeVar, cast

T = TypeVar("T")
P = ParamSpec("P")

#: Seconds a stopping server waits for the worker threads still in a call (a store call ends within the
#: store's own timeouts) before it gives up closing the index itself.
WORKERS_STOP_SECONDS = 10.0
#: Seconds a streamed answer whose client went away waits for the chunk a worker thread is making (a
#: store read, itself bounded by the store's timeouts) before the request ends.
ABANDONED_CHUNK_SECONDS = 30.0


class WorkerPool(ThreadPoolExecutor):
    """A thread pool that remembers when each queued call was submitted until a thread takes it."""

    def __init__(self, threads: int) -> None:
        super().__init__(max_workers=threads, thread_name_prefix="smart-transfer-worker")
        self._lock = threading.Lock()
        #: Submission times of the calls no thread has taken yet, oldest first. An OrderedDict, not a dict:
        #: its first item is found in O(1) however many were deleted before it (a dict scans past the holes).
        self._waiting: OrderedDict[int, float] = OrderedDict()
        self._tickets = count()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Queue ``fn(*args, **kwargs)``; its wait ends when a thread starts it, or when it is cancelled
        before that (an ``asyncio.to_thread`` whose task was cancelled: no thread ever takes it)."""
        with self._lock:
            ticket = next(self._tickets)
            self._waiting[ticket] = time.monotonic()

        def started() -> T:
            self._forget(ticket)
            return fn(*args, **kwargs)

        try:
            future = super().submit(started)
        except BaseException:
            self._forget(ticket)
            raise
        future.add_done_callback(lambda _: self._forget(ticket))
        return future

    def _forget(self, ticket: int) -> None:
        with self._lock:
            self._waiting.pop(ticket, None)

    def oldest_wait(self) -> float:
        """Seconds the oldest call still in the queue has waited (0 when none waits)."""
        with self._lock:
            if not self._waiting:
                return 0.0
            oldest = next(iter(self._waiting.values()))
        return max(0.0, time.monotonic() - oldest)

    def stop(self, seconds: float) -> int:
        """Cancel the calls no thread has taken (their requests are gone) and wait up to ``seconds`` for
        the running ones; the number still running then. Python's own shutdown would run every queued
        call first, and on 3.11 ``asyncio.run`` waits for that without a bound."""
        self.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + seconds
        threads = list(self._threads)  # ThreadPoolExecutor's own set of its threads
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return sum(thread.is_alive() for thread in threads)

    @property
    def queued(self) -> int:
        """Calls waiting for a thread."""
        return len(self._waiting)


def on_workers(route: Callable[P, T]) -> Callable[P, Coroutine[Any, Any, T]]:
    """A blocking route made a coroutine that runs it on the worker pool. FastAPI would run it on
    Starlette's own thread pool, whose queue the overload guard does not see. FastAPI reads the
    parameters through ``functools.wraps`` (``__wrapped__``), in the route's own module."""

    @functools.wraps(route)
    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return await asyncio.to_thread(route, *args, **kwargs)

    return run


async def iterate_on_workers(chunks: Iterator[T]) -> AsyncIterator[T]:
    """``chunks`` made one at a time on the worker pool (a streamed answer whose chunks read the store):
    Starlette would iterate a plain iterator on its own thread pool. When the client goes away while a
    chunk is being made, the answer waits for that chunk (up to ABANDONED_CHUNK_SECONDS) before it ends,
    so that its request slot is not freed while its thread still works; then ``chunks`` is closed."""
    done = object()
    making: asyncio.Task[object] | None = None
    try:
        while True:
            making = asyncio.ensure_future(asyncio.to_thread(next, chunks, done))
            chunk = await asyncio.shield(making)
            making = None
            if chunk is done:
                return
            yield cast(T, chunk)
    finally:
        if making is not None:
            await asyncio.wait({making}, timeout=ABANDONED_CHUNK_SECONDS)
        close = getattr(chunks, "close", None)
        if close is not None and (making is None or making.done()):  # never while a thread runs it
            await asyncio.to_thread(close)
