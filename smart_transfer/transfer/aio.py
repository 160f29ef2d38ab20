"""The aiohttp implementation of ``ObjectTransport``: the one that can wait for a global rate limit between
chunks (``--limit-rate``), and the one a channel's own session speaks (the simple protocol's objects
go through the server, in the pool of its REST calls). Also where aiohttp sessions are made.

aiohttp's errors become the transport's: a connection refused, broken or timed out while connecting is
StorageUnreachable, no byte for the read timeout or an attempt over its total is StorageStalled.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import BinaryIO

import aiohttp

from smart_transfer.transfer.errors import StorageStalled, StorageUnreachable
from smart_transfer.transfer.limits import STREAM_CHUNK_BYTES, Timeouts
from smart_transfer.transfer.ratelimit import RateLimiter
from smart_transfer.transfer.transport import (
    Answer,
    Body,
    BodyTooLarge,
    Call,
    FileRange,
    Gathered,
    ObjectTransport,
    Sink,
)

#: Chunk size of rate-limited uploads (finer, so the limit holds over short spans).
LIMITED_CHUNK_BYTES = 64 * 1024


def request_timeout(timeouts: Timeouts, size: int) -> aiohttp.ClientTimeout:
    """The bounds of one attempt at an object of ``size`` bytes: connect, no byte for ``read``
    seconds, and a total that grows with the size."""
    return aiohttp.ClientTimeout(
        total=timeouts.object_seconds(size), sock_connect=timeouts.connect, sock_read=timeouts.read
    )


def make_session(parallel: int, timeouts: Timeouts | None = None) -> aiohttp.ClientSession:
    """One pooled HTTP session: keep-alive connections sized to the parallelism; every request is
    bounded by ``timeouts`` (object transfers pass their own total, scaled by size)."""
    connector = aiohttp.TCPConnector(limit=parallel, limit_per_host=parallel, ttl_dns_cache=300)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=request_timeout(timeouts or Timeouts(), 0),
        auto_decompress=False,  # the bytes must be exactly what was stored
        skip_auto_headers=("Content-Type",),
    )


def _mapped(exc: BaseException) -> Exception:
    """aiohttp's failure as the transport's (see the module docstring)."""
    if isinstance(exc, aiohttp.SocketTimeoutError):
        return StorageStalled(str(exc) or "no byte for the read timeout", no_byte=True)
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return StorageUnreachable(str(exc) or "connection timed out")
    if isinstance(exc, TimeoutError):
        return StorageStalled(str(exc) or "the attempt took longer than its total", no_byte=False)
    return StorageUnreachable(str(exc) or type(exc).__name__)


class AiohttpTransport(ObjectTransport):
    """Exchanges on an aiohttp ``session`` (not closed here); every chunk moved, either way, first
    draws from ``limiter`` when there is one."""

    def __init__(self, session: aiohttp.ClientSession, limiter: RateLimiter | None = None) -> None:
        self._session = session
        self._limiter = limiter

    async def exchange(self, call: Call) -> Answer:
        """See ``ObjectTransport.exchange``."""
        sent = dict(call.headers)
        body = call.body
        with contextlib.ExitStack() as stack:
            data = None if body is None else self._body(body, stack)
            if body is not None:
                # S3 needs a Content-Length (no chunked uploads to presigned URLs)
                sent["Content-Length"] = str(len(body) if isinstance(body, bytes) else body.length)
            try:
                bounds = request_timeout(call.timeouts, call.size)
                request = self._session.request(call.method, call.url, data=data, headers=sent, timeout=bounds)
                async with request as response:
                    kept = await self._receive(response, call.max_bytes, call.sink)
                    return Answer(response.status, kept, {k.lower(): v for k, v in response.headers.items()})
            except (aiohttp.ClientError, TimeoutError, ConnectionError) as exc:
                raise _mapped(exc) from exc

    def _body(self, body: Body, stack: contextlib.ExitStack) -> bytes | BinaryIO | AsyncIterator[bytes]:
        if isinstance(body, bytes):
            return body if self._limiter is None else self._limited(body)
        source = stack.enter_context(open(body.path, "rb"))  # noqa: SIM115 - closed with the exchange
        if self._limiter is None and body.offset == 0 and body.length == body.path.stat().st_size:
            return source  # aiohttp reads a whole file off the event loop
        return self._slice(source, body)

    async def _limited(self, body: bytes) -> AsyncIterator[bytes]:
        assert self._limiter is not None
        for start in range(0, len(body), LIMITED_CHUNK_BYTES):
            chunk = body[start : start + LIMITED_CHUNK_BYTES]
            await self._limiter.acquire(len(chunk))
            yield chunk

    async def _slice(self, source: BinaryIO, part: FileRange) -> AsyncIterator[bytes]:
        """Bytes ``[offset, offset + length)`` of the file, a chunk at a time."""
        source.seek(part.offset)
        remaining = part.length
        step = STREAM_CHUNK_BYTES if self._limiter is None else LIMITED_CHUNK_BYTES
        while remaining > 0:
            chunk = source.read(min(step, remaining))
            if not chunk:
                raise ValueError(f"{part.path} is shorter than the range that starts at {part.offset}")
            if self._limiter is not None:
                await self._limiter.acquire(len(chunk))
            remaining -= len(chunk)
            yield chunk

    async def _receive(self, response: aiohttp.ClientResponse, max_bytes: int, sink: Sink | None) -> bytes:
        """The body, chunk by chunk: to the sink when the status is the one it takes (``Gathered``),
        else kept."""
        gathered = Gathered(sink) if sink is not None and response.status == sink.status else None
        kept: list[bytes] = []
        received = 0
        while chunk := await response.content.read(sink.buffer_bytes if sink is not None else STREAM_CHUNK_BYTES):
            received += len(chunk)
            if received > max_bytes:
                raise BodyTooLarge(max_bytes)
            if self._limiter is not None:
                await self._limiter.acquire(len(chunk))
            if gathered is not None:
                gathered.add(chunk)
            else:
                kept.append(chunk)
        if gathered is not None:
            gathered.flush()
        return b"".join(kept)
