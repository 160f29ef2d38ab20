"""Concurrency limits: sessions (WebSocket) and requests (REST), globally and per token subject.
Over the limit the answer is a typed "busy, retry after N s" (Error Busy / HTTP 429 Retry-After)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Busy(Exception):
    """Too many concurrent sessions or requests; retry after ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: int) -> None:
        self.retry_after = retry_after
        super().__init__(message)


class ConcurrencyLimit:
    """At most ``total`` holders at once, and at most ``per_subject`` for one subject."""

    def __init__(
        self, what: str, total: int, per_subject: int, retry_after: int, on_busy: Callable[[], None] | None = None
    ) -> None:
        self.what = what
        self.total = total
        self.per_subject = per_subject
        self.retry_after = retry_after
        self.on_busy = on_busy
        self._lock = threading.Lock()
        self._by_subject: Counter[str] = Counter()
        self._active = 0

    def _busy(self, message: str) -> Busy:
        if self.on_busy is not None:
            self.on_busy()
        return Busy(message, self.retry_after)

    @contextmanager
    def hold(self, subject: str) -> Iterator[None]:
        """One slot for ``subject`` while the block runs; Busy when none is free."""
        with self._lock:
            if self._active >= self.total:
                raise self._busy(f"server busy: {self._active} {self.what} in progress (limit {self.total})")
            if self._by_subject[subject] >= self.per_subject:
                raise self._busy(f"{subject} already has {self.per_subject} {self.what} in progress")
            self._active += 1
            self._by_subject[subject] += 1
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1
                self._by_subject[subject] -= 1
                if not self._by_subject[subject]:
                    del self._by_subject[subject]

    @property
    def active(self) -> int:
        return self._active
