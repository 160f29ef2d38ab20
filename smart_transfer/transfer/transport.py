"""The one seam through which object bytes move: ``ObjectTransport.exchange``, one HTTP request and its
answer, implemented twice (libcurl in ``curl.py``, aiohttp in ``aio.py``) and chosen once, by
``choice.open_transport``. This module is the interface alone: it imports neither implementation.

An exchange knows nothing of objects: it sends a method, URL, headers and body (bytes, or a range of a
file streamed from disk), bounds the attempt by ``Timeouts`` and the answer's size, and hands the body of
the expected status to a ``Sink`` as it arrives (so callers hash while they write) or returns it. What
the bytes mean (verification, retries with backoff, error statuses, URL expiry) lives above it, once,
in ``http.py``, ``ranges.py`` and ``multipart.py``. Both implementations raise the same errors:
``StorageUnreachable`` (no answer: no connection, or one that broke), ``StorageStalled`` (out of
time), ``BodyTooLarge`` (the answer passed its bound), or what the sink raised.

No network library is imported by this module: the flows import it before they know objects will move.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from pathlib import Path

from msgspec import Struct

from smart_transfer.transfer.limits import Timeouts

#: The longest the bytes of a sink's answer wait to be handed to it, however few (a slow store's bytes
#: still show as progress several times a second).
SINK_MAX_DELAY = 0.25
#: The longest error body (an S3 error document, a typed error) read from an answer that is not the
#: object's bytes.
ERROR_BODY_BYTES = 64 * 1024


class BodyTooLarge(Exception):
    """The answer's body passed the bound the exchange was given (nothing more of it was read)."""


class Answer(Struct, frozen=True):
    """A finished exchange: the HTTP status, the body (what was not streamed to a sink) and the headers
    (names in lower case; libcurl collects them only for an exchange with a sink)."""

    status: int
    body: bytes
    headers: dict[str, str]


class Sink(Struct, frozen=True):
    """Where the body of an answer with ``status`` goes as it arrives (a ranged GET's 206 into its
    file), instead of memory: ``write`` gets the bytes that arrived since its last call, in order, as
    the chunks they came in (about ``buffer_bytes`` a call: fewer, larger calls, and no copy to join
    them). What ``write`` raises fails the exchange with it."""

    write: Callable[[list[bytes]], object]
    status: int
    buffer_bytes: int


class Gathered:
    """The body of a sink's answer on its way to the sink: chunks gathered into pieces of about its
    ``buffer_bytes``, handed over (``Sink.write``) once that many wait or SINK_MAX_DELAY after the last
    piece, and what is left by ``flush``. What the sink raises, ``add`` and ``flush`` raise.

    Why: libcurl 8 hands its callback 16 KiB at a time whatever the receive buffer, and aiohttp what
    the socket had; a sink call is a thread hand-off in a download (to the writer that hashes it),
    so an 8 MiB object was 512 of them (a 64 x 8 MiB pull spent a third of its client CPU there)."""

    __slots__ = ("_chunks", "_since", "_size", "sink")

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self._chunks: list[bytes] = []
        self._size = 0
        self._since = time.monotonic()

    def add(self, chunk: bytes) -> None:
        """The next chunk of the body: held, or handed over with those before it."""
        self._chunks.append(chunk)
        self._size += len(chunk)
        if self._size >= self.sink.buffer_bytes or time.monotonic() - self._since >= SINK_MAX_DELAY:
            self.flush()

    def flush(self) -> None:
        """Hand over what is held (the end of the body)."""
        piece, self._chunks, self._size, self._since = self._chunks, [], 0, time.monotonic()
        if piece:
            self.sink.write(piece)


class FileRange(Struct, frozen=True):
    """A request body read from disk as it is sent: ``length`` bytes of the file at ``path`` from
    ``offset`` (a file shorter than that fails the exchange with ValueError)."""

    path: Path
    offset: int
    length: int


#: A request body: bytes in memory, or a range of a file.
Body = bytes | FileRange


class Call(Struct, frozen=True):
    """One exchange to make: ``method`` ``url`` with ``headers`` (and ``body``, sent with its
    Content-Length); an attempt at an object of ``size`` bytes is bounded by ``timeouts``, the
    answer's body by ``max_bytes`` (past it: BodyTooLarge); the body of an answer with the sink's
    status goes to ``sink`` as it arrives."""

    method: str
    url: str
    headers: Mapping[str, str]
    timeouts: Timeouts
    size: int
    max_bytes: int
    body: Body | None = None
    sink: Sink | None = None


class ObjectTransport(ABC):
    """Moves the bytes of HTTP exchanges; see the module docstring."""

    @abstractmethod
    async def exchange(self, call: Call) -> Answer:
        """Make ``call``; raises StorageUnreachable or StorageStalled when no whole answer came,
        BodyTooLarge, and what the sink raised or the body's file did (OSError, ValueError)."""


#: The two implementations, by name.
LIBRARIES = ("libcurl", "aiohttp")
