"""Concurrency limits: sessions (WebSocket) and requests (REST), globally and per token subject.
Over the limit the answer is a typed "busy, retry after N s" (Error Busy / HTTP 429 Retry-After). The
global limit is the static cap, or (``--admission adaptive``) an adaptive limit below it that the
server's store call latencies and its own delay steer, and a second one that the holders' own durations
steer (their pace): the lower of the two (server/adaptive.py).

When the adaptive limit (not the cap, not the per-subject limit) is what is full, a newcomer may wait
for a slot (``--admission-queue-wait``), in order of arrival, before it is refused: under overload slots
free all the time, and a client told to come back in seconds leaves its slot idle until then (a server
refusing at once ran at a fraction of its throughput while its clients backed off). A freed slot goes
to the oldest waiter directly, so a newcomer cannot take it first. The wait counts as admission, not as
the operation's. At the cap the refusal stays immediate: the cap is the operator's bound."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from smart_transfer.server.adaptive import AdaptiveLimit


class Busy(Exception):
    """Too many concurrent sessions or requests; retry after ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: int) -> None:
        self.retry_after = retry_after
        super().__init__(message)


class ConcurrencyLimit:
    """At most ``total`` holders at once (fewer while ``adaptive`` says so), and at most ``per_subject``
    for one subject; a newcomer held back by the adaptive limit alone waits up to ``queue_wait`` seconds
    for a slot. ``observe_store`` gives the adaptive limit its samples, ``observe_hold`` the ``pace`` limit
    (when there is one) its own; ``clock`` times them (a test injects its own). Every hold runs on the
    server's event loop (its waits are futures of that loop)."""

    def __init__(
        self,
        what: str,
        total: int,
        per_subject: int,
        retry_after: int,
        on_busy: Callable[[], None] | None = None,
        adaptive: AdaptiveLimit | None = None,
        clock: Callable[[], float] = time.monotonic,
        queue_wait: float = 0.0,
        pace: AdaptiveLimit | None = None,
    ) -> None:
        self.what = what
        self.total = total
        self.per_subject = per_subject
        self.retry_after = retry_after
        self.on_busy = on_busy
        self.adaptive = adaptive
        self.clock = clock
        self.queue_wait = queue_wait
        self.pace = pace
        #: Refusals because the adaptive limit stood below the static cap (the cap alone would have admitted).
        self.adaptive_refusals = 0
        self._lock = threading.Lock()
        self._by_subject: Counter[str] = Counter()
        self._active = 0
        #: Newcomers waiting for a slot, oldest first.
        self._waiting: deque[_Waiter] = deque()

    def _busy(self, message: str) -> Busy:
        if self.on_busy is not None:
            self.on_busy()
        return Busy(message, self.retry_after)

    @property
    def limit(self) -> int:
        """How many holders are admitted now: the lower adaptive limit, or the static cap."""
        limits = [found.admits for found in (self.adaptive, self.pace) if found is not None]
        return min(limits) if limits else self.total

    @property
    def waiting(self) -> int:
        """Newcomers waiting for a slot now."""
        return len(self._waiting)

    def _refusal(self, subject: str) -> tuple[str, bool] | None:
        """Why ``subject`` may not take a slot now, and whether waiting for one may help; None: it may."""
        if self._by_subject[subject] >= self.per_subject:
            return f"{subject} already has {self.per_subject} {self.what} in progress", False
        limit = self.limit
        if self._active >= self.total:
            return f"server busy: {self._active} {self.what} in progress (limit {self.total})", False
        if self._active >= limit or self._waiting:  # the oldest waiter gets the next slot
            message = (
                f"server busy: {self._active} {self.what} in progress (adaptive limit {limit} of {self.total}: "
                "operations take longer than usual, or the server runs its work late)"
            )
            return message, True
        return None

    def _take(self, subject: str) -> None:
        self._active += 1
        self._by_subject[subject] += 1

    async def _acquire(self, subject: str) -> None:
        """Take a slot for ``subject``, waiting for one when only the adaptive limit stands in the way;
        Busy when none comes (or when the cap or the subject's limit is reached)."""
        with self._lock:
            self._hand_out()  # slots the limit gained since the last release go to the oldest waiters first
            refusal = self._refusal(subject)
            if refusal is None:
                self._take(subject)
                return
            message, may_wait = refusal
            if not may_wait or self.queue_wait <= 0 or len(self._waiting) >= self.total:
                if may_wait:
                    self.adaptive_refusals += 1
                raise self._busy(message)
            waiter = _Waiter(subject, asyncio.get_running_loop().create_future())
            self._waiting.append(waiter)
        try:
            # not wait_for: on 3.11 it swallows a cancellation that meets a slot handed over just then
            async with asyncio.timeout(self.queue_wait):
                await asyncio.shield(waiter.admitted)
        except TimeoutError:
            if self._give_up(waiter):
                self.adaptive_refusals += 1
                raise self._busy(message + f"; no slot freed within {self.queue_wait:g} s") from None
        except asyncio.CancelledError:  # the client went away while it waited
            if not self._give_up(waiter):
                with self._lock:
                    self._release(subject)  # the slot handed to it meanwhile goes to the next
            raise

    def _give_up(self, waiter: _Waiter) -> bool:
        """A waiter stops waiting; False when a slot was handed to it meanwhile (then it keeps it)."""
        with self._lock:
            if waiter.admitted.done():
                return False
            waiter.admitted.cancel()
            self._waiting.remove(waiter)
            return True

    def _release(self, subject: str) -> None:
        """Give a slot back (the lock held) and hand free slots to the oldest waiters."""
        self._active -= 1
        self._by_subject[subject] -= 1
        if not self._by_subject[subject]:
            del self._by_subject[subject]
        self._hand_out()

    def _hand_out(self) -> None:
        """Give free slots to the oldest waiters that may take one (the lock held, on the event loop)."""
        for waiter in list(self._waiting):
            if self._active >= self.limit:
                break
            if self._by_subject[waiter.subject] >= self.per_subject:
                continue  # its subject is at its own limit: it waits on, the next one may go
            self._waiting.remove(waiter)
            self._take(waiter.subject)
            waiter.admitted.set_result(None)

    @asynccontextmanager
    async def hold(self, subject: str, kind: str | None = None) -> AsyncIterator[None]:
        """One slot for ``subject`` while the block runs; Busy when none is free (after waiting, when only
        the adaptive limit stands in the way). With a ``kind``, a block that ends normally is a sample of
        that kind for the pace limit (``observe_hold``)."""
        await self._acquire(subject)
        started = self.clock()
        try:
            yield
        finally:
            with self._lock:
                holders = self._active  # itself included, as a session's own report counts
                self._release(subject)
        if kind is not None:
            self._pace_sample(kind, self.clock() - started, holders)

    def observe_store(self, operation: str, seconds: float) -> None:
        """One call of the server to its store (any thread) took ``seconds``: a sample of ``operation``
        for the adaptive limit. The store's own latency, not an operation's duration: a session lasts as
        long as its client takes (its transfers, its CPU), which admission cannot shorten, while a store
        that saturates answers every call later."""
        if self.adaptive is None:
            return
        with self._lock:
            self.adaptive.sample(operation, seconds, self.clock(), self._active)

    def observe_hold(self, kind: str, seconds: float) -> None:
        """One holder of ``kind`` finished its work in ``seconds`` (a whole session or request, timed from
        its slot): a sample for the ``pace`` limit, if there is one. The caller leaves out holders whose
        duration is not work (a follower waiting for news)."""
        self._pace_sample(kind, seconds, self._active)

    def _pace_sample(self, kind: str, seconds: float, holders: int) -> None:
        if self.pace is None:
            return
        with self._lock:
            self.pace.sample(kind, seconds, self.clock(), holders)

    @property
    def active(self) -> int:
        return self._active


@dataclass
class _Waiter:
    """A newcomer waiting for a slot: its subject, and the future a freed slot resolves."""

    subject: str
    admitted: asyncio.Future[None] = field(repr=False)
