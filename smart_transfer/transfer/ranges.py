"""Downloads of large objects as parallel ranged GETs of one presigned URL, into a preallocated staging
file that becomes visible only once its hash is verified (the caller renames it into place).

Each range is written at its offset and then recorded in a journal beside the staging file, so a
download killed midway resumes with the ranges still missing (a range is recorded only after its bytes
are written). The object's hash is computed in order while ranges arrive: a thread follows the
completed prefix of the file. A download whose hash does not match is discarded; when it had resumed
ranges of an earlier run (which a crash or a bad disk may have damaged) it starts over once from
nothing before the object is reported corrupt.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from msgspec import Struct

from smart_transfer.model import Multihash
from smart_transfer.model.multihash import new_hasher
from smart_transfer.protocol.messages import HttpRequest
from smart_transfer.storage.parts import Part, layout
from smart_transfer.transfer.errors import TransferFailed, UrlExpired
from smart_transfer.transfer.http import Verified, bounded_exchange, check_status, with_retries
from smart_transfer.transfer.limits import LargeObjects, Timeouts
from smart_transfer.transfer.pieces import run_pieces
from smart_transfer.transfer.transport import ERROR_BODY_BYTES, ObjectTransport, Sink
from smart_transfer.transfer.writer import pwrite_all

#: Bytes read per call while hashing the completed prefix.
HASH_READ_BYTES = 8 * 1024 * 1024
#: The receive buffer of a range (libcurl's largest is 10 MiB): one write call per MiB, not per
#: 16 KiB (measured on a 1 GiB object: a third of aiohttp's user CPU, two thirds of its system time).
RANGE_BUFFER_BYTES = 1024 * 1024


class RangeJournal:
    """Which ranges of a staging file are written: a header naming the object and the range size,
    then one line per finished range. A journal for another object or range size is started over."""

    def __init__(self, path: Path, header: str) -> None:
        self.path = path
        self.done: set[int] = set()
        try:
            lines = path.read_text().splitlines()
        except FileNotFoundError:
            lines = []
        if lines and lines[0] == header:
            self.done = {int(line) for line in lines[1:] if line.isdigit()}
        else:
            path.write_text(header + "\n")
        self._out = open(path, "a")  # noqa: SIM115 - closed by close()

    def mark(self, number: int) -> None:
        """Record range ``number`` as written (its bytes are in the file before this line is)."""
        self.done.add(number)
        self._out.write(f"{number}\n")
        self._out.flush()

    def close(self) -> None:
        self._out.close()


class PrefixHasher:
    """Hashes the staging file in order as its ranges complete, in a worker thread."""

    def __init__(self, path: Path, ranges: Sequence[Part], code: int) -> None:
        self._path = path
        self._ranges = ranges
        self._hasher = new_hasher(code)
        self._code = code
        self._ready = {part.number: asyncio.Event() for part in ranges}

    def ready(self, number: int) -> None:
        self._ready[number].set()

    def _hash(self, fd: int, part: Part) -> None:
        position, end = part.offset, part.offset + part.length
        while position < end:
            chunk = os.pread(fd, min(HASH_READ_BYTES, end - position), position)
            if not chunk:
                raise TransferFailed(self._path.name, "the staging file is shorter than its ranges")
            self._hasher.update(chunk)
            position += len(chunk)

    async def digest(self) -> Multihash:
        """The hash of the whole file, once every range is ready."""
        fd = os.open(self._path, os.O_RDONLY)
        try:
            for part in self._ranges:
                await self._ready[part.number].wait()
                await asyncio.to_thread(self._hash, fd, part)
        finally:
            os.close(fd)
        return Multihash(self._code, self._hasher.digest())


class RangedDownload(Struct, frozen=True):
    """One large object to download: its presigned GET, hash, size and where it is staged."""

    request: HttpRequest
    expected_hash: Multihash
    size: int
    staging: Path

    @property
    def name(self) -> str:
        return str(self.expected_hash)

    @property
    def journal(self) -> Path:
        return self.staging.with_name(self.staging.name + ".ranges")


def _content_range_ok(content_range: str, part: Part, size: int) -> bool:
    """Whether a 206 answer holds exactly the bytes asked for (``Content-Range: bytes a-b/size``)."""
    expected = f"bytes {part.offset}-{part.offset + part.length - 1}/{size}"
    return content_range.strip() == expected


async def _fetch_range(
    transport: ObjectTransport,
    job: RangedDownload,
    fd: int,
    part: Part,
    on_bytes: Callable[[int], None],
    timeouts: Timeouts,
) -> None:
    """Fetch one range into its place in the staging file, retried."""
    headers = {**job.request.headers, "Range": f"bytes={part.offset}-{part.offset + part.length - 1}"}
    await with_retries(
        job.name, lambda: _range_attempt(transport, job, fd, part, headers, on_bytes, timeouts), timeouts, part.length
    )


def _whole(job: RangedDownload, part: Part, written: int) -> int:
    """``written``, when it is the whole range (a shorter answer is a broken connection: retried)."""
    if written != part.length:
        raise TransferFailed(job.name, f"range {part.number}: {written} bytes, expected {part.length}", network=True)
    return written


async def _range_attempt(
    transport: ObjectTransport,
    job: RangedDownload,
    fd: int,
    part: Part,
    headers: dict[str, str],
    on_bytes: Callable[[int], None],
    timeouts: Timeouts,
) -> int:
    """One attempt at a range: a 206's bytes are written at their offset as they arrive, anything else
    is an error answer. Its Content-Range is checked once it ends: a wrong one fails the range before
    the journal records it (the staging file is never visible unverified)."""
    written = 0
    longer = f"range {part.number} is longer than asked for"

    def write(chunks: list[bytes]) -> None:
        nonlocal written
        size = sum(map(len, chunks))
        if written + size > part.length:
            raise TransferFailed(job.name, longer)
        pwrite_all(fd, chunks, part.offset + written)
        written += size
        on_bytes(size)

    answer = await bounded_exchange(
        transport,
        job.name,
        job.request,
        timeouts,
        part.length,
        too_large=longer,
        max_bytes=max(part.length, ERROR_BODY_BYTES),
        sink=Sink(write, 206, RANGE_BUFFER_BYTES),
        headers=headers,
    )
    if answer.status != 206:
        check_status(job.name, answer.status, answer.body)
        raise TransferFailed(job.name, f"storage answered {answer.status} to a ranged GET, not 206")
    if not _content_range_ok(answer.headers.get("content-range", ""), part, job.size):
        raise TransferFailed(job.name, "storage sent another range than asked for (or a size change)")
    return _whole(job, part, written)


def _open_staging(job: RangedDownload, header: str) -> tuple[RangeJournal, int]:
    """The journal and an open descriptor of the staging file, preallocated to the object's size."""
    journal = RangeJournal(job.journal, header)
    if not journal.done:
        job.staging.unlink(missing_ok=True)
    fd = os.open(job.staging, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size != job.size:
            os.posix_fallocate(fd, 0, job.size)  # fails now, not midway, when the disk is too small
            os.ftruncate(fd, job.size)
    except OSError as exc:
        os.close(fd)
        journal.close()
        raise TransferFailed(job.name, f"cannot stage {job.size} bytes: {exc.strerror}") from None
    return journal, fd


def discard(job: RangedDownload) -> None:
    """Remove the staging file and its journal."""
    job.staging.unlink(missing_ok=True)
    job.journal.unlink(missing_ok=True)


async def _download_once(
    transport: ObjectTransport,
    job: RangedDownload,
    large: LargeObjects,
    on_bytes: Callable[[int], None],
    timeouts: Timeouts,
    slots: asyncio.Semaphore | None,
) -> tuple[Multihash, int, bool]:
    """Fetch the missing ranges; (the file's hash, the bytes fetched, whether ranges of an earlier run
    were reused)."""
    ranges = layout(job.size, large.range_size)
    journal, fd = await asyncio.to_thread(_open_staging, job, f"{job.expected_hash} {job.size} {large.range_size}")
    resumed = bool(journal.done)
    hasher = PrefixHasher(job.staging, ranges, job.expected_hash.code)
    for number in journal.done:
        hasher.ready(number)
    hashing = asyncio.create_task(hasher.digest())

    fetched = 0

    async def fetch(part: Part) -> None:
        nonlocal fetched
        await _fetch_range(transport, job, fd, part, on_bytes, timeouts)
        journal.mark(part.number)
        hasher.ready(part.number)
        fetched += part.length

    try:
        missing = [part for part in ranges if part.number not in journal.done]
        try:
            await run_pieces(missing, fetch, large.parallel_parts, slots)
        except UrlExpired as refused:
            raise UrlExpired(job.name, fetched, refused.refusal) from None  # the ranges that arrived are kept
        return await hashing, fetched, resumed
    finally:
        hashing.cancel()
        with contextlib.suppress(asyncio.CancelledError, TransferFailed):
            await hashing
        os.close(fd)
        journal.close()


async def download_ranges(
    transport: ObjectTransport,
    job: RangedDownload,
    large: LargeObjects,
    on_bytes: Callable[[int], None],
    timeouts: Timeouts | None = None,
    slots: asyncio.Semaphore | None = None,
) -> Verified:
    """Download ``job`` in ranges over ``transport`` (see the module docstring); raises TransferFailed
    or UrlExpired and keeps what arrived for the next attempt, except a download whose hash does not
    match."""
    timeouts = timeouts or Timeouts()
    digest, moved, resumed = await _download_once(transport, job, large, on_bytes, timeouts, slots)
    if digest != job.expected_hash and resumed:
        await asyncio.to_thread(discard, job)  # a damaged leftover of an earlier run: once more, from nothing
        digest, again, resumed = await _download_once(transport, job, large, on_bytes, timeouts, slots)
        moved += again
    if digest != job.expected_hash:
        await asyncio.to_thread(discard, job)
        raise TransferFailed(job.name, "content does not match its hash (corrupted in storage?)")
    job.journal.unlink(missing_ok=True)
    return Verified(job.staging, job.size, moved)
