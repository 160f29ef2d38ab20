"""A streamed body written and hashed in order by a thread of its own, off the event loop.

The loop hands the chunks over as they arrive (``put``: a queue append, a list of chunks at a time)
and goes back to the sockets, while the thread feeds the hasher and writes the file; hashlib and file
writes release the GIL, so on a machine with more than one core the verification of one download runs
beside the receiving of the others instead of between them. The hash is done with the last byte
(``finish`` drains at most ``bound`` queued bytes). Memory stays bounded: once ``bound`` bytes wait,
``put`` waits for the thread (the loop then runs no faster than the disk and the hasher, as when it did
the work itself).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import BinaryIO, Protocol


class Hasher(Protocol):
    """What the writer feeds: a hashlib object."""

    def update(self, data: bytes, /) -> None:
        """Hash the next bytes."""


class BackgroundWriter:
    """Writes chunks to ``out`` and feeds them to ``hasher``, in the order ``put`` was called, in a
    thread started here; ``finish`` (or ``abandon``) must end it."""

    def __init__(self, out: BinaryIO, hasher: Hasher, bound: int, name: str = "writer") -> None:
        self._out = out
        self._hasher = hasher
        self._bound = bound
        self._queue: deque[tuple[list[bytes], int]] = deque()
        self._pending = 0
        self._closed = False
        self._dropped = False
        self._failed: BaseException | None = None
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, chunks: list[bytes], size: int | None = None) -> None:
        """Queue ``chunks`` (``size``: the bytes they hold, when the caller counted them already); waits
        while ``bound`` bytes wait already; raises what the thread failed with."""
        size = sum(map(len, chunks)) if size is None else size
        with self._changed:
            self._changed.wait_for(lambda: self._pending < self._bound or self._failed is not None)
            if self._failed is not None:
                raise self._failed
            self._queue.append((chunks, size))
            self._pending += size
            self._changed.notify_all()

    def _next(self) -> tuple[list[bytes], int] | None:
        with self._changed:
            self._changed.wait_for(lambda: bool(self._queue) or self._closed)
            if self._dropped or not self._queue:
                return None
            return self._queue[0]

    def _done(self, size: int) -> None:
        with self._changed:
            self._queue.popleft()
            self._pending -= size
            self._changed.notify_all()

    def _run(self) -> None:
        try:
            while (item := self._next()) is not None:
                chunks, size = item
                for chunk in chunks:
                    self._hasher.update(chunk)
                    self._out.write(chunk)
                self._done(size)
        except BaseException as exc:  # handed to the loop by put() and finish(), never lost
            with self._changed:
                self._failed = exc
                self._changed.notify_all()

    def _stop(self, drop: bool) -> None:
        with self._changed:
            self._closed = True
            self._dropped = drop
            self._changed.notify_all()
        self._thread.join()

    def finish(self) -> None:
        """Write and hash every queued chunk, end the thread (blocks: call it from a worker thread);
        raises what the thread failed with."""
        self._stop(drop=False)
        if self._failed is not None:
            raise self._failed

    def abandon(self) -> None:
        """End the thread without the queued chunks (a failed attempt): it finishes at most the chunk
        it is on, so this returns quickly even on the loop."""
        self._stop(drop=True)
