"""Object transfers to and from URLs, over the one ``ObjectTransport`` (``transport.py``), whichever library
moves the bytes: retried with backoff, bounded, verified, their failures typed, once.

Downloads stream into a temporary file inside the workspace store while hashing (small objects through
memory); only an object whose multihash and size match becomes visible (the caller renames it). Uploads
send the file with the headers the URL was signed for (Content-MD5), so the store refuses any other
body.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import BinaryIO, TypeVar

import orjson
from msgspec import Struct

from smart_transfer.model import Multihash
from smart_transfer.model.multihash import new_hasher
from smart_transfer.protocol.codes import RETRYABLE, ErrorCode
from smart_transfer.protocol.messages import HttpRequest
from smart_transfer.storage.digest import content_mismatch
from smart_transfer.transfer.backoff import backoff_delay
from smart_transfer.transfer.errors import StorageStalled, TransferFailed, TransferRefused, UrlExpired
from smart_transfer.transfer.limits import (
    DEFAULT_PARALLEL,
    INLINE_WRITE_BYTES,
    RETRY_BASE_DELAY,
    SMALL_OBJECT_BYTES,
    STREAM_CHUNK_BYTES,
    WRITE_QUEUE_BYTES,
    Timeouts,
)
from smart_transfer.transfer.transport import (
    ERROR_BODY_BYTES,
    Answer,
    Body,
    BodyTooLarge,
    Call,
    FileRange,
    ObjectTransport,
    Sink,
)
from smart_transfer.transfer.writer import BackgroundWriter

__all__ = [
    "DEFAULT_PARALLEL",
    "Timeouts",
    "TransferFailed",
    "TransferRefused",
    "UrlExpired",
    "download",
    "download_bytes",
    "upload",
]

T = TypeVar("T")


class Verified(Struct, frozen=True):
    """A download that matched: where it was written, its size, and how many bytes this call moved
    (fewer when a resumed download reused what an earlier run fetched)."""

    temp_path: Path
    size: int
    moved: int


def _failure(name: str, exc: BaseException, timeouts: Timeouts, size: int) -> TransferFailed:
    """What a failed attempt means: storage stopped answering (a stall: every path to it would wait
    the same), or could not be reached (a network problem another path may avoid)."""
    if isinstance(exc, StorageStalled) and exc.no_byte:
        return TransferFailed(
            name,
            f"storage stopped answering: no byte for {timeouts.read:g} s on {timeouts.attempts} attempt(s)",
            stalled=True,
        )
    if isinstance(exc, TimeoutError):
        return TransferFailed(
            name,
            f"storage stopped answering: {size} bytes took longer than {timeouts.object_seconds(size):.0f} s "
            f"on {timeouts.attempts} attempt(s)",
            stalled=True,
        )
    return TransferFailed(name, f"storage unreachable: {exc or type(exc).__name__}", network=True)


async def with_retries(name: str, attempt: Callable[[], Awaitable[T]], timeouts: Timeouts, size: int) -> T:
    """``attempt`` until it succeeds, at most ``timeouts.attempts`` times, waiting a backoff between
    attempts that failed on the network (the transports' StorageUnreachable and StorageStalled); raises
    TransferFailed (UrlExpired, TransferRefused at once)."""
    for number in range(1, timeouts.attempts + 1):
        try:
            return await attempt()
        except (UrlExpired, TransferRefused):
            raise
        except TransferFailed as exc:
            if not exc.network or number == timeouts.attempts:
                raise
        except (TimeoutError, ConnectionError) as exc:
            if number == timeouts.attempts:
                raise _failure(name, exc, timeouts, size) from None
        await asyncio.sleep(backoff_delay(number, RETRY_BASE_DELAY))
    raise AssertionError("unreachable")


async def bounded_exchange(
    transport: ObjectTransport,
    name: str,
    request: HttpRequest,
    timeouts: Timeouts,
    size: int,
    *,
    too_large: str,
    max_bytes: int,
    body: Body | None = None,
    sink: Sink | None = None,
    headers: dict[str, str] | None = None,
) -> Answer:
    """One attempt at ``request`` (a GET, or a PUT of ``body``; with other ``headers`` when given) for
    an object of ``size`` bytes; an answer over ``max_bytes`` fails it as TransferFailed(``too_large``)
    without reading the rest."""
    call = Call(
        "GET" if body is None else "PUT",
        request.url,
        request.headers if headers is None else headers,
        timeouts,
        size,
        max_bytes,
        body,
        sink,
    )
    try:
        return await transport.exchange(call)
    except BodyTooLarge:
        raise TransferFailed(name, too_large) from None


async def exchange_once(
    transport: ObjectTransport,
    name: str,
    request: HttpRequest,
    timeouts: Timeouts,
    size: int,
    *,
    accepted: tuple[int, ...],
    body: Body | None = None,
    sink: Sink | None = None,
) -> Answer:
    """One attempt at an object of ``size`` bytes: a GET (its body to ``sink``, or in the answer; at
    most ``size`` bytes, or an error document) or a PUT of ``body`` (an answer of at most an error
    document). A status not ``accepted`` raises what ``check_status`` says it means."""
    if body is None:
        too_large, bound = f"larger than the {size} bytes its block records", max(size, ERROR_BODY_BYTES)
    else:
        too_large, bound = f"storage answered with more than {ERROR_BODY_BYTES} bytes", ERROR_BODY_BYTES
    answer = await bounded_exchange(
        transport, name, request, timeouts, size, too_large=too_large, max_bytes=bound, body=body, sink=sink
    )
    if answer.status not in accepted:
        check_status(name, answer.status, answer.body, upload=body is not None)
    return answer


#: The error code of an S3 error document (``<Code>AccessDenied</Code>``).
_STORE_CODE = re.compile(rb"<Code>([A-Za-z0-9.]{1,64})</Code>")


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


def check_status(name: str, status: int, body: bytes, *, upload: bool = False) -> None:
    """Raise what an answer that is not the one asked for means: the server's typed refusal, an
    expired URL (403, with the store's error code for the user's line), a retryable failure (5xx, 429)
    or another error status."""
    typed = _typed_error(body)
    if typed is not None and typed[0] not in RETRYABLE:
        raise TransferRefused(name, *typed)
    if status == 403:
        code = _STORE_CODE.search(body)
        said = f" {code.group(1).decode('ascii', 'replace')}" if code else ""
        raise UrlExpired(name, refusal=f"the store refused the {'upload' if upload else 'download'} (HTTP 403{said})")
    if status >= 500 or status == 429:
        raise TransferFailed(name, f"storage answered HTTP {status}", network=True, status=status)
    if status >= 300:
        raise TransferFailed(name, f"storage answered HTTP {status}: {body[:200]!r}", status=status)


def _verify(name: str, expected_hash: Multihash, expected_size: int, actual: Multihash, size: int) -> None:
    """Raise TransferFailed unless the bytes had the object's size and hash."""
    problem = content_mismatch(expected_hash, expected_size, actual, size)
    if problem is not None:
        raise TransferFailed(name, f"{problem} (corrupted in storage?)")


class _VerifyingSink:
    """The body of a 200 answer written to a file as it arrives, counted on the loop and hashed and
    written in order by a thread of its own (``writer.py``: verification overlaps the network and
    the other downloads); fails once it is longer than the object (the caller keeps nothing then)."""

    def __init__(self, name: str, expected_hash: Multihash, expected_size: int, out: BinaryIO) -> None:
        self.name = name
        self.expected_hash = expected_hash
        self.expected_size = expected_size
        self.hasher = new_hasher(expected_hash.code)
        self.writer = BackgroundWriter(out, self.hasher, WRITE_QUEUE_BYTES, name=f"download {name[:16]}")
        self.size = 0

    def write(self, chunks: list[bytes]) -> int:
        """Queue the next chunks for the writer; the number of bytes they hold."""
        size = sum(map(len, chunks))
        self.size += size
        if self.size > self.expected_size:
            raise TransferFailed(self.name, f"larger than the {self.expected_size} bytes its block records")
        self.writer.put(chunks, size)
        return size

    async def check(self) -> None:
        """Raise TransferFailed unless the whole body had the object's size and hash (once every
        queued byte is written and hashed)."""
        await asyncio.to_thread(self.writer.finish)
        actual = Multihash(self.expected_hash.code, self.hasher.digest())
        _verify(self.name, self.expected_hash, self.expected_size, actual, self.size)


async def download(
    transport: ObjectTransport,
    request: HttpRequest,
    expected_hash: Multihash,
    expected_size: int,
    temp_path: Path,
    on_bytes: Callable[[int], None],
    timeouts: Timeouts | None = None,
) -> Verified:
    """GET ``request`` into ``temp_path``, verifying the multihash and size as the bytes arrive (each
    attempt starts the file over); raises TransferFailed."""
    name = str(expected_hash)
    timeouts = timeouts or Timeouts()

    async def attempt() -> int:
        with open(temp_path, "wb") as out:
            verifying = _VerifyingSink(name, expected_hash, expected_size, out)

            def write(chunks: list[bytes]) -> None:
                on_bytes(verifying.write(chunks))

            sink = Sink(write, 200, STREAM_CHUNK_BYTES)
            try:
                await exchange_once(transport, name, request, timeouts, expected_size, accepted=(200,), sink=sink)
                await verifying.check()
            finally:
                verifying.writer.abandon()  # ended already unless the attempt failed: never left running
        return expected_size

    try:
        await with_retries(name, attempt, timeouts, expected_size)
    except BaseException:
        temp_path.unlink(missing_ok=True)
        raise
    return Verified(temp_path, expected_size, expected_size)


async def download_bytes(
    transport: ObjectTransport,
    request: HttpRequest,
    expected_hash: Multihash,
    expected_size: int,
    on_bytes: Callable[[int], None],
    timeouts: Timeouts | None = None,
) -> bytes:
    """GET a small object (at most SMALL_OBJECT_BYTES) into memory, verified like ``download`` (the
    whole body, before anyone sees it): no file is opened on the event loop, so thousands of small
    objects do not stall each other."""
    name = str(expected_hash)
    timeouts = timeouts or Timeouts()

    async def attempt() -> bytes:
        answer = await exchange_once(transport, name, request, timeouts, expected_size, accepted=(200,))
        if len(answer.body) > expected_size:
            raise TransferFailed(name, f"larger than the {expected_size} bytes its block records")
        _verify(name, expected_hash, expected_size, Multihash.of(answer.body, expected_hash.code), len(answer.body))
        on_bytes(len(answer.body))
        return answer.body

    return await with_retries(name, attempt, timeouts, expected_size)


def _read_if_small(path: Path) -> tuple[int, bytes | None]:
    """The size of the file at ``path`` and, up to SMALL_OBJECT_BYTES, its bytes."""
    with open(path, "rb") as source:
        size = os.fstat(source.fileno()).st_size
        return size, source.read() if size <= SMALL_OBJECT_BYTES else None


async def upload(
    transport: ObjectTransport,
    request: HttpRequest,
    name: str,
    path: Path,
    on_bytes: Callable[[int], None],
    timeouts: Timeouts | None = None,
    size_hint: int | None = None,
) -> int:
    """PUT the file at ``path`` with the signed headers; raises TransferFailed or UrlExpired. A small
    file is read once (on the event loop when ``size_hint`` says it is at most INLINE_WRITE_BYTES:
    cheaper than a thread hand-off); a larger one streams from disk at each attempt."""
    timeouts = timeouts or Timeouts()
    if size_hint is not None and size_hint <= INLINE_WRITE_BYTES:
        size, small = _read_if_small(path)
    else:
        size, small = await asyncio.to_thread(_read_if_small, path)
    body: Body = small if small is not None else FileRange(path, 0, size)

    async def attempt() -> int:
        answer = await exchange_once(transport, name, request, timeouts, size, accepted=(200, 202), body=body)
        if _already_held(request, answer.status, answer.body):
            return 0  # the server had it and answered before the body was sent (Expect: 100-continue)
        on_bytes(size)
        return size

    return await with_retries(name, attempt, timeouts, size)
