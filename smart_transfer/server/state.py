"""What every route and session of one server shares."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import ProtocolError
from smart_transfer.repo import Repository
from smart_transfer.server.adaptive import AdaptiveLimit
from smart_transfer.server.announce import PeerBook
from smart_transfer.server.auth import Authorizer, Grant
from smart_transfer.server.congestion import ServerDelay
from smart_transfer.server.follow import HeadWatch
from smart_transfer.server.limits import Busy, ConcurrencyLimit
from smart_transfer.server.metrics import Metrics
from smart_transfer.server.settings import ServerSettings
from smart_transfer.server.signer import Signer
from smart_transfer.server.workers import WorkerPool

T = TypeVar("T")


def limit_subject(grant: Grant | None, client_host: str | None) -> str:
    """Whom the per-subject limits count: the token's subject, or an anonymous client's address
    (so anonymous clients do not share one quota)."""
    if grant is not None:
        return grant.subject
    return f"anonymous@{client_host or 'unknown'}"


class ServerState:
    """Settings, the repository (and through it the store), the URL clients reach us at, the limits,
    the metrics, and whether the server is shutting down."""

    def __init__(self, settings: ServerSettings, repository: Repository, base_url: str) -> None:
        self.settings = settings
        self.repository = repository
        self.base_url = base_url
        self.metrics = Metrics()
        #: Every presigned object URL is made and counted here (server/signer.py).
        self.signer = Signer(self.metrics)
        self.authorizer = Authorizer.from_file(settings.tokens_file) if settings.tokens_file else Authorizer()
        #: The threads of every blocking call (installed as the loop's default executor at start).
        self.workers = WorkerPool(settings.worker_threads)
        self.metrics.watch_workers(lambda: self.workers.queued, self.workers.oldest_wait)
        #: How late the server runs its work (sampled by the lifespan's task; steers the adaptive limits).
        self.delay = ServerDelay(self.workers.oldest_wait)
        self.metrics.watch_delay(self.delay)
        self.sessions = self._limit("sessions", settings.max_sessions, settings.max_sessions_per_token, paced=True)
        self.requests = self._limit("requests", settings.max_requests, settings.max_requests_per_token, paced=True)
        repository.store.observe(self._store_call)
        #: Peer announcements (pull --announce) and the head watchers of following sessions.
        self.peers = PeerBook(settings.peer_ttl_seconds, settings.max_peers_listed)
        self.heads = HeadWatch(settings.follow_poll_min_seconds, settings.follow_poll_max_seconds)
        #: Object bytes this process itself read or wrote for clients (embedded-store routes and
        #: streamed REST reads and writes). The smart path on S3 must leave it at zero.
        self.object_bytes_through_server = 0
        #: Set on SIGTERM: no new session or request is taken; running sessions end when it fires.
        self.draining = False
        self._shutdown = asyncio.Event()

    def _limit(self, what: str, total: int, per_token: int, paced: bool = False) -> ConcurrencyLimit:
        """A concurrency limit of ``what`` (adaptive under its cap unless ``--admission static``; ``paced``:
        its holders' durations steer it too), counting its Busy answers and showing its state in the
        metrics."""
        retry = self.settings.busy_retry_after_seconds
        bounds = self.settings.adaptive_bounds(total)
        adaptive = AdaptiveLimit(bounds, self.delay) if bounds is not None else None
        pace_bounds = self.settings.pace_bounds(total) if paced else None
        limit = ConcurrencyLimit(
            what,
            total,
            per_token,
            retry,
            lambda: self.metrics.busy.labels(what).inc(),
            adaptive=adaptive,
            queue_wait=self.settings.admission_queue_wait_seconds,
            pace=AdaptiveLimit(pace_bounds) if pace_bounds is not None else None,
        )
        self.metrics.watch_admission(limit)
        return limit

    def _store_call(self, operation: str, seconds: float, ok: bool) -> None:
        """A StoreObserver: every call to the store's backend is counted and timed, and its latency steers
        both adaptive limits."""
        self.metrics.store_call(operation, seconds, ok)
        self.sessions.observe_store(operation, seconds)
        self.requests.observe_store(operation, seconds)

    def temp_path(self) -> Path:
        """A fresh temporary file path on the server's disk (for bodies checked before storing)."""
        directory = self.settings.root / "tmp"
        directory.mkdir(parents=True, exist_ok=True)
        return directory / f"{os.getpid()}-{secrets.token_hex(8)}"

    def count_object_bytes(self, count: int) -> None:
        self.object_bytes_through_server += count
        self.metrics.bytes_through_server.inc(count)

    def refuse_if_draining(self) -> None:
        """New work is refused while the server shuts down (a balancer sends it elsewhere)."""
        if self.draining:
            self.metrics.busy.labels("shutting-down").inc()
            raise ProtocolError(ErrorCode.SHUTTING_DOWN, "the server is shutting down; run it again")

    def refuse_if_overloaded(self) -> None:
        """New work is refused as Busy while blocking work already waits longer than ``--max-queue-wait``
        for a thread: what was admitted finishes sooner, and a client told to retry does not time out."""
        waited = self.workers.oldest_wait()
        limit = self.settings.max_queue_wait_seconds
        if waited > limit:
            self.metrics.busy.labels("queue").inc()
            message = f"server busy: its work has waited {waited:.1f} s for a thread (limit {limit:g} s)"
            raise Busy(message, self.settings.busy_retry_after_seconds)

    def begin_drain(self) -> None:
        self.draining = True

    def end_sessions(self) -> None:
        """The grace period is over: every running session ends with ShuttingDown."""
        self._shutdown.set()

    async def until_shutdown(self, work: Awaitable[T]) -> T:
        """Await ``work``, unless the server ends the running sessions first: then ``work`` is
        cancelled (a commit in flight still finishes, see push_flow) and ShuttingDown raised."""
        task = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self._shutdown.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not task.done():
                task.cancel()
                await asyncio.wait({task})
        if task.cancelled() and self._shutdown.is_set():
            raise ProtocolError(ErrorCode.SHUTTING_DOWN, "the server is shutting down; run it again")
        return task.result()
