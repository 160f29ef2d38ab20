"""The one seam through which object bytes move: ``ObjectTransport.exchange``, one HTTP request and its
answer, implemented twice (libcurl in ``curl.py``, aiohttp in ``aio.py``) and chosen once, here, by
``open_transport``.

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

import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from smart_transfer.transfer.limits import Timeouts
from smart_transfer.transfer.ratelimit import RateLimiter

if TYPE_CHECKING:
    import aiohttp

#: The longest error body (an S3 error document, a typed error) read from an answer that is not the
#: object's bytes.
ERROR_BODY_BYTES = 64 * 1024


class BodyTooLarge(Exception):
    """The answer's body passed the bound the exchange was given (nothing more of it was read)."""


@dataclass(frozen=True, slots=True)
class Answer:
    """A finished exchange: the HTTP status, the body (what was not streamed to a sink) and the headers
    (names in lower case; libcurl collects them only for an exchange with a sink)."""

    status: int
    body: bytes
    headers: dict[str, str]


@dataclass(frozen=True, slots=True)
class Sink:
    """Where the body of an answer with ``status`` goes as it arrives (a ranged GET's 206 into its
    file), instead of memory; ``buffer_bytes``: the receive buffer (fewer, larger calls). What
    ``write`` raises fails the exchange with it."""

    write: Callable[[bytes], object]
    status: int
    buffer_bytes: int


@dataclass(frozen=True, slots=True)
class FileRange:
    """A request body read from disk as it is sent: ``length`` bytes of the file at ``path`` from
    ``offset`` (a file shorter than that fails the exchange with ValueError)."""

    path: Path
    offset: int
    length: int


#: A request body: bytes in memory, or a range of a file.
Body = bytes | FileRange


@dataclass(frozen=True, slots=True)
class Call:
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


@contextlib.asynccontextmanager
async def open_library(library: str, parallel: int, timeouts: Timeouts | None = None) -> AsyncIterator[ObjectTransport]:
    """A transport of the named ``library`` (one of LIBRARIES) with its own pool of at most
    ``parallel`` connections, closed on exit; what the tests and benchmarks compare. Flows use
    ``open_transport``, which chooses."""
    if library == "libcurl":
        from smart_transfer.transfer.curl import CurlEngine

        engine = CurlEngine(parallel)
        try:
            yield engine
        finally:
            engine.close()
        return
    from smart_transfer.transfer import aio

    async with aio.make_session(parallel, timeouts) as session:
        yield aio.AiohttpTransport(session)


@contextlib.asynccontextmanager
async def open_transport(
    parallel: int,
    timeouts: Timeouts,
    limiter: RateLimiter | None = None,
    *,
    shared: aiohttp.ClientSession | None = None,
    storage: bool = True,
) -> AsyncIterator[ObjectTransport]:
    """The one choice of HTTP library, by one rule: libcurl moves every object to or from storage's
    presigned URLs (small, mid-size, ranges, parts: it costs a fraction of aiohttp's CPU); aiohttp
    moves an object only when a global rate limit is set (libcurl's callbacks cannot wait for it), when
    the channel brings its own session (``shared``: the simple protocol, whose objects go through the
    server with its credentials, in one pool with its calls) or when the source is not storage
    (``storage`` false: peers). At most ``parallel`` connections; ``timeouts`` bound the requests a
    new aiohttp session makes of its own."""
    from smart_transfer.transfer import aio

    if shared is not None:
        yield aio.AiohttpTransport(shared, limiter)
        return
    if not storage or limiter is not None:
        async with aio.make_session(parallel, timeouts) as session:
            yield aio.AiohttpTransport(session, limiter)
        return
    async with open_library("libcurl", parallel) as transport:
        yield transport
