"""Direct object transfers over HTTP to presigned URLs: parallel, pooled, retried, verified.

Downloads stream into a temporary file inside the workspace store while hashing; only an object
whose multihash and size match becomes visible (atomic rename). Uploads send the file with the
headers the URL was signed for (Content-MD5), so the store refuses any other body.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TypeVar

import aiohttp
import orjson

from smart_transfer.model import Multihash
from smart_transfer.model.multihash import new_hasher
from smart_transfer.protocol.errors import RETRYABLE, ErrorCode
from smart_transfer.protocol.messages import HttpRequest
from smart_transfer.storage.digest import content_mismatch
from smart_transfer.transfer.backoff import backoff_delay
from smart_transfer.transfer.errors import StorageStalled, TransferFailed, TransferRefused, UrlExpired
from smart_transfer.transfer.limits import (
    DEFAULT_PARALLEL,
    INLINE_WRITE_BYTES,
    RETRY_BASE_DELAY,
    SMALL_OBJECT_BYTES,
    Timeouts,
)
from smart_transfer.transfer.ratelimit import RateLimiter

if TYPE_CHECKING:
    from smart_transfer.transfer.curl import Answer, CurlEngine

__all__ = [
    "DEFAULT_PARALLEL",
    "Timeouts",
    "TransferFailed",
    "TransferRefused",
    "UrlExpired",
    "download",
    "download_bytes",
    "make_session",
    "upload",
]

#: Read size while streaming downloads.
CHUNK_BYTES = 1024 * 1024
#: Chunk size of rate-limited uploads.
UPLOAD_CHUNK_BYTES = 64 * 1024
#: The longest error body (an S3 error document, a typed error) read from an answer that is not the
#: object's bytes.
ERROR_BODY_BYTES = 64 * 1024

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Verified:
    """A download that matched: where it was written, its size, and how many bytes this call moved
    (fewer when a resumed download reused what an earlier run fetched)."""

    temp_path: Path
    size: int
    moved: int


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


def _failure(name: str, exc: BaseException, timeouts: Timeouts, size: int) -> TransferFailed:
    """What a failed attempt means: storage stopped answering (a stall: every path to it would wait
    the same), or could not be reached (a network problem another path may avoid)."""
    if isinstance(exc, aiohttp.SocketTimeoutError) or (isinstance(exc, StorageStalled) and exc.no_byte):
        return TransferFailed(
            name,
            f"storage stopped answering: no byte for {timeouts.read:g} s on {timeouts.attempts} attempt(s)",
            stalled=True,
        )
    if isinstance(exc, TimeoutError) and not isinstance(exc, aiohttp.ConnectionTimeoutError):
        return TransferFailed(
            name,
            f"storage stopped answering: {size} bytes took longer than {timeouts.object_seconds(size):.0f} s "
            f"on {timeouts.attempts} attempt(s)",
            stalled=True,
        )
    return TransferFailed(name, f"storage unreachable: {exc or type(exc).__name__}", network=True)


async def with_retries(name: str, attempt: Callable[[], Awaitable[T]], timeouts: Timeouts, size: int) -> T:
    """``attempt`` until it succeeds, at most ``timeouts.attempts`` times, waiting a backoff between
    attempts that failed on the network; raises TransferFailed (UrlExpired, TransferRefused at once)."""
    for number in range(1, timeouts.attempts + 1):
        try:
            return await attempt()
        except (UrlExpired, TransferRefused):
            raise
        except TransferFailed as exc:
            if not exc.network or number == timeouts.attempts:
                raise
        except (aiohttp.ClientError, TimeoutError, ConnectionError) as exc:
            if number == timeouts.attempts:
                raise _failure(name, exc, timeouts, size) from None
        await asyncio.sleep(backoff_delay(number, RETRY_BASE_DELAY))
    raise AssertionError("unreachable")


def _typed_error(body: bytes) -> tuple[ErrorCode, str] | None:
    """The code and message of a smart-transfer error body, None for anything else (a store's answer)."""
    try:
        error = orjson.loads(body)["error"]
        return ErrorCode(error["code"]), str(error["message"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


def _already_held(request: HttpRequest, status: int, answer: bytes) -> bool:
    """A smart-transfer server's ``200 {"created": false}`` to a request that waited for 100-continue."""
    if status != 200 or request.headers.get("Expect", "").lower() != "100-continue":
        return False
    try:
        return orjson.loads(answer).get("created") is False
    except (orjson.JSONDecodeError, AttributeError):
        return False


def check_status(name: str, status: int, body: bytes) -> None:
    typed = _typed_error(body)
    if typed is not None and typed[0] not in RETRYABLE:
        raise TransferRefused(name, *typed)
    if status == 403:
        raise UrlExpired(name)
    if status >= 500 or status == 429:
        raise TransferFailed(name, f"storage answered HTTP {status}", network=True, status=status)
    if status >= 300:
        raise TransferFailed(name, f"storage answered HTTP {status}: {body[:200]!r}", status=status)


async def _verified_chunks(
    response: aiohttp.ClientResponse,
    name: str,
    expected_hash: Multihash,
    expected_size: int,
    on_bytes: Callable[[int], None],
    limiter: RateLimiter | None,
) -> AsyncIterator[bytes]:
    """The body of a 200 answer, chunk by chunk; raises TransferFailed once the bytes are longer or
    shorter than ``expected_size`` or do not hash to ``expected_hash`` (the caller keeps nothing then)."""
    hasher = new_hasher(expected_hash.code)
    size = 0
    async for chunk in response.content.iter_chunked(CHUNK_BYTES):
        if limiter is not None:
            await limiter.acquire(len(chunk))
        size += len(chunk)
        if size > expected_size:
            raise TransferFailed(name, f"larger than the {expected_size} bytes its block records")
        hasher.update(chunk)
        on_bytes(len(chunk))
        yield chunk
    problem = content_mismatch(expected_hash, expected_size, Multihash(expected_hash.code, hasher.digest()), size)
    if problem is not None:
        raise TransferFailed(name, f"{problem} (corrupted in storage?)")


async def _get_verified(
    session: aiohttp.ClientSession,
    request: HttpRequest,
    expected_hash: Multihash,
    expected_size: int,
    on_bytes: Callable[[int], None],
    keep: Callable[[AsyncIterator[bytes]], Awaitable[None]],
    timeouts: Timeouts | None,
    limiter: RateLimiter | None,
) -> None:
    """GET ``request`` with retries, handing each attempt's body (verified as it streams, see
    ``_verified_chunks``) to ``keep``, which starts over on every attempt; raises TransferFailed."""
    name = str(expected_hash)
    timeouts = timeouts or Timeouts()
    bounds = request_timeout(timeouts, expected_size)

    async def attempt() -> int:
        async with session.get(request.url, headers=request.headers, timeout=bounds) as response:
            if response.status != 200:
                check_status(name, response.status, await response.read())
            await keep(_verified_chunks(response, name, expected_hash, expected_size, on_bytes, limiter))
        return expected_size

    await with_retries(name, attempt, timeouts, expected_size)


async def download(
    session: aiohttp.ClientSession,
    request: HttpRequest,
    expected_hash: Multihash,
    expected_size: int,
    temp_path: Path,
    on_bytes: Callable[[int], None],
    timeouts: Timeouts | None = None,
    limiter: RateLimiter | None = None,
) -> Verified:
    """GET ``request`` into ``temp_path``, verifying the multihash and size; raises TransferFailed."""

    async def write(chunks: AsyncIterator[bytes]) -> None:
        with open(temp_path, "wb") as out:
            async for chunk in chunks:
                out.write(chunk)

    try:
        await _get_verified(session, request, expected_hash, expected_size, on_bytes, write, timeouts, limiter)
    except BaseException:
        temp_path.unlink(missing_ok=True)
        raise
    return Verified(temp_path, expected_size, expected_size)


async def download_bytes(
    session: aiohttp.ClientSession,
    request: HttpRequest,
    expected_hash: Multihash,
    expected_size: int,
    on_bytes: Callable[[int], None],
    timeouts: Timeouts | None = None,
    limiter: RateLimiter | None = None,
    engine: CurlEngine | None = None,
) -> bytes:
    """GET a small object (at most SMALL_OBJECT_BYTES) into memory, verified like ``download``: no
    file is opened on the event loop, so thousands of small objects do not stall each other. With
    an ``engine`` (and no rate limit) libcurl moves it instead of aiohttp (see ``curl.py``)."""
    if engine is not None and limiter is None:
        return await _curl_get(engine, request, expected_hash, expected_size, on_bytes, timeouts or Timeouts())
    body: list[bytes] = []

    async def collect(chunks: AsyncIterator[bytes]) -> None:
        body.clear()
        body.extend([chunk async for chunk in chunks])

    await _get_verified(session, request, expected_hash, expected_size, on_bytes, collect, timeouts, limiter)
    return b"".join(body)


async def _curl_get(
    engine: CurlEngine,
    request: HttpRequest,
    expected_hash: Multihash,
    expected_size: int,
    on_bytes: Callable[[int], None],
    timeouts: Timeouts,
) -> bytes:
    """``download_bytes`` through libcurl: the whole body, checked like ``_verified_chunks`` checks
    a stream, before anyone sees it."""
    name = str(expected_hash)

    async def attempt() -> bytes:
        answer = await _curl_exchange(engine, name, request, timeouts, expected_size, None, expected_size)
        if answer.status != 200:
            check_status(name, answer.status, answer.body)
        if len(answer.body) > expected_size:
            raise TransferFailed(name, f"larger than the {expected_size} bytes its block records")
        actual = Multihash.of(answer.body, expected_hash.code)
        problem = content_mismatch(expected_hash, expected_size, actual, len(answer.body))
        if problem is not None:
            raise TransferFailed(name, f"{problem} (corrupted in storage?)")
        on_bytes(len(answer.body))
        return answer.body

    return await with_retries(name, attempt, timeouts, expected_size)


async def _curl_exchange(
    engine: CurlEngine,
    name: str,
    request: HttpRequest,
    timeouts: Timeouts,
    size: int,
    body: bytes | None,
    expected_size: int,
) -> Answer:
    """One attempt through libcurl; an answer longer than the object (or than an error document)
    fails it without reading the rest."""
    from smart_transfer.transfer.curl import BodyTooLarge

    bound = max(expected_size, ERROR_BODY_BYTES)
    try:
        return await engine.exchange(request.url, request.headers, timeouts, size, body=body, max_bytes=bound)
    except BodyTooLarge:
        if body is not None:
            raise TransferFailed(name, f"storage answered with more than {bound} bytes") from None
        raise TransferFailed(name, f"larger than the {expected_size} bytes its block records") from None


def _read_if_small(path: Path, may_read: bool) -> tuple[int, bytes | None]:
    """The size of the file at ``path`` and, up to SMALL_OBJECT_BYTES (when ``may_read``), its bytes."""
    with open(path, "rb") as source:
        size = os.fstat(source.fileno()).st_size
        return size, source.read() if may_read and size <= SMALL_OBJECT_BYTES else None


async def upload(
    session: aiohttp.ClientSession,
    request: HttpRequest,
    name: str,
    path: Path,
    on_bytes: Callable[[int], None],
    timeouts: Timeouts | None = None,
    limiter: RateLimiter | None = None,
    engine: CurlEngine | None = None,
    size_hint: int | None = None,
) -> int:
    """PUT the file at ``path`` with the signed headers; raises TransferFailed or UrlExpired. A file
    that ``size_hint`` says is at most INLINE_WRITE_BYTES is read on the event loop (cheaper than a
    thread hand-off); with an ``engine`` (and no rate limit) libcurl sends a small one."""

    async def throttled(source: BinaryIO) -> AsyncIterator[bytes]:
        assert limiter is not None
        while chunk := source.read(UPLOAD_CHUNK_BYTES):
            await limiter.acquire(len(chunk))
            yield chunk

    timeouts = timeouts or Timeouts()
    # a small file is read once, off the event loop; a large one streams from disk at each attempt
    if size_hint is not None and size_hint <= INLINE_WRITE_BYTES:
        size, small = _read_if_small(path, limiter is None)
    else:
        size, small = await asyncio.to_thread(_read_if_small, path, limiter is None)
    if engine is not None and small is not None:
        return await with_retries(
            name, lambda: _curl_put(engine, request, name, small, on_bytes, timeouts), timeouts, size
        )
    bounds = request_timeout(timeouts, size)

    async def attempt() -> int:
        # S3 needs a Content-Length (no chunked uploads to presigned URLs)
        headers = {**request.headers, "Content-Length": str(size)}
        with contextlib.ExitStack() as stack:
            if small is not None:
                body: bytes | BinaryIO | AsyncIterator[bytes] = small
            else:
                source = stack.enter_context(open(path, "rb"))
                body = source if limiter is None else throttled(source)
            async with session.put(request.url, data=body, headers=headers, timeout=bounds) as response:
                answer = await response.read()
                if response.status not in (200, 202):
                    check_status(name, response.status, answer)
        if _already_held(request, response.status, answer):
            return 0  # the server had it and answered before the body was sent (Expect: 100-continue)
        on_bytes(size)
        return size

    return await with_retries(name, attempt, timeouts, size)


async def _curl_put(
    engine: CurlEngine,
    request: HttpRequest,
    name: str,
    body: bytes,
    on_bytes: Callable[[int], None],
    timeouts: Timeouts,
) -> int:
    """One attempt of ``upload`` through libcurl (which sends the Content-Length)."""
    answer = await _curl_exchange(engine, name, request, timeouts, len(body), body, 0)
    if answer.status not in (200, 202):
        check_status(name, answer.status, answer.body)
    if _already_held(request, answer.status, answer.body):
        return 0  # the server had it and answered before the body was sent (Expect: 100-continue)
    on_bytes(len(body))
    return len(body)
