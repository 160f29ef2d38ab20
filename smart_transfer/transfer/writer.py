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

import io
import os
import threading
from collections import deque
from typing import BinaryIO, Protocol

#: Most buffers one vectored write takes (Linux's IOV_MAX).
IOV_MAX = 1024


def pwrite_all(fd: int, chunks: list[bytes], offset: int) -> None:
    """Write ``chunks`` one after another at ``offset`` of ``fd``: one system call per IOV_MAX chunks,
    no copy to join them (a write that stops short goes on from where it stopped)."""
    pending = chunks
    while pending:
        batch = pending[:IOV_MAX]
        written = os.pwritev(fd, batch, offset)
        if written == 0 and any(batch):
            raise OSError(f"no byte written at offset {offset}")
        offset += written
        done = 0
        while done < len(batch) and written >= len(batch[done]):
            written -= len(batch[done])
            done += 1
        pending = pending[done:]
        if written:  # the next chunk was written in part
            pending = [pending[0][written:], *pending[1:]]


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
        #: The file's descriptor and where the next bytes go, for one vectored write per ``put`` (a file
        #: object without a descriptor is written chunk by chunk).
        self._fd = _descriptor(out)
        self._offset = out.tell() if self._fd is not None else 0
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
                self._write(chunks, size)
                self._done(size)
        except BaseException as exc:  # handed to the loop by put() and finish(), never lost
            with self._changed:
                self._failed = exc
                self._changed.notify_all()

    def _write(self, chunks: list[bytes], size: int) -> None:
        if self._fd is None:
            for chunk in chunks:
                self._out.write(chunk)
            return
        pwrite_all(self._fd, chunks, self._offset)
        self._offset += size

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


def _descriptor(out: BinaryIO) -> int | None:
    """The descriptor of ``out`` when its bytes may be written to it directly (nothing is buffered in
    ``out``), else None."""
    try:
        fd = out.fileno()
    except (AttributeError, io.UnsupportedOperation):
        return None
    out.flush()
    return fd
