"""Concurrency limits: sessions (WebSocket) and requests (REST), globally and per token subject.
Over the limit the answer is a typed "busy, retry after N s" (Error Busy / HTTP 429 Retry-After). The
global limit is the static cap, or (``--admission adaptive``) an adaptive limit below it that every
admitted operation's duration steers (server/adaptive.py)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from smart_transfer.server.adaptive import AdaptiveLimit


@dataclass
class Slot:
    """One admitted holder: its kind, and the units of work it did (1, plus one per presigned URL it was
    given: each is an object transfer the store serves). The adaptive limit samples its duration per unit."""

    kind: str
    work: int = 1


#: The slot of the session running in this task (set by the session's own task, carried into worker
#: threads by ``asyncio.to_thread``), so that the signer counts the session's work; None elsewhere.
SESSION_SLOT: ContextVar[Slot | None] = ContextVar("smart_transfer_session_slot", default=None)


class Busy(Exception):
    """Too many concurrent sessions or requests; retry after ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: int) -> None:
        self.retry_after = retry_after
        super().__init__(message)


class ConcurrencyLimit:
    """At most ``total`` holders at once (fewer while ``adaptive`` says so), and at most ``per_subject``
    for one subject. ``clock`` times each hold for the adaptive limit (a test injects its own)."""

    def __init__(
        self,
        what: str,
        total: int,
        per_subject: int,
        retry_after: int,
        on_busy: Callable[[], None] | None = None,
        adaptive: AdaptiveLimit | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self.total = total
        self.per_subject = per_subject
        self.retry_after = retry_after
        self.on_busy = on_busy
        self.adaptive = adaptive
        self.clock = clock
        #: Refusals because the adaptive limit stood below the static cap (the cap alone would have admitted).
        self.adaptive_refusals = 0
        self._lock = threading.Lock()
        self._by_subject: Counter[str] = Counter()
        self._active = 0

    def _busy(self, message: str) -> Busy:
        if self.on_busy is not None:
            self.on_busy()
        return Busy(message, self.retry_after)

    @property
    def limit(self) -> int:
        """How many holders are admitted now: the adaptive limit, or the static cap."""
        return self.adaptive.admits if self.adaptive is not None else self.total

    def _take(self, subject: str) -> None:
        limit = self.limit
        if self._active >= limit:
            if limit < self.total:
                self.adaptive_refusals += 1
                raise self._busy(
                    f"server busy: {self._active} {self.what} in progress (adaptive limit {limit} of {self.total}: "
                    "the store answers slower than usual)"
                )
            raise self._busy(f"server busy: {self._active} {self.what} in progress (limit {self.total})")
        if self._by_subject[subject] >= self.per_subject:
            raise self._busy(f"{subject} already has {self.per_subject} {self.what} in progress")
        self._active += 1
        self._by_subject[subject] += 1

    @contextmanager
    def hold(self, subject: str, kind: str = "") -> Iterator[Slot]:
        """One slot for ``subject`` while the block runs; Busy when none is free. How long the block ran,
        per unit of the slot's work, is a sample of ``kind`` for the adaptive limit."""
        with self._lock:
            self._take(subject)
        slot = Slot(kind)
        started = self.clock()
        try:
            yield slot
        finally:
            with self._lock:
                if self.adaptive is not None:
                    now = self.clock()
                    self.adaptive.sample(kind, (now - started) / max(1, slot.work), now, self._active)
                self._active -= 1
                self._by_subject[subject] -= 1
                if not self._by_subject[subject]:
                    del self._by_subject[subject]

    @property
    def active(self) -> int:
        return self._active
