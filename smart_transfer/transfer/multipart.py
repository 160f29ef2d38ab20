"""Uploads of large objects in parts: each part the server handed out is PUT to its presigned URL
(Content-MD5 bound into it) straight from its slice of the file, several at a time. Parts the store
already holds were left out by the server, so a push killed midway sends only the rest; a refused URL
(expired) raises UrlExpired, and the server's fresh answer names only the parts still missing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp

from smart_transfer.protocol.messages import MultipartUpload, UploadPart
from smart_transfer.transfer.errors import UrlExpired
from smart_transfer.transfer.http import CHUNK_BYTES, check_status, request_timeout, with_retries
from smart_transfer.transfer.limits import Timeouts
from smart_transfer.transfer.pieces import run_pieces
from smart_transfer.transfer.ratelimit import RateLimiter


async def _slice(path: Path, offset: int, length: int, limiter: RateLimiter | None) -> AsyncIterator[bytes]:
    """Bytes ``[offset, offset + length)`` of the file, a chunk at a time."""
    with open(path, "rb") as source:
        source.seek(offset)
        remaining = length
        while remaining > 0:
            chunk = source.read(min(CHUNK_BYTES, remaining))
            if not chunk:
                raise ValueError(f"{path} is shorter than the part that starts at {offset}")
            if limiter is not None:
                await limiter.acquire(len(chunk))
            remaining -= len(chunk)
            yield chunk


async def upload_parts(
    http: aiohttp.ClientSession,
    upload: MultipartUpload,
    name: str,
    path: Path,
    on_bytes: Callable[[int], None],
    *,
    parallel: int,
    timeouts: Timeouts | None = None,
    limiter: RateLimiter | None = None,
    slots: asyncio.Semaphore | None = None,
) -> int:
    """PUT every part of ``upload`` from the file at ``path``, ``parallel`` at a time (sharing
    ``slots`` with the other transfers); returns the bytes sent."""
    timeouts = timeouts or Timeouts()
    size = path.stat().st_size
    sent = 0

    async def send(part: UploadPart) -> None:
        nonlocal sent
        offset = (part.part_number - 1) * upload.part_size
        length = min(upload.part_size, size - offset)
        if length <= 0:
            raise ValueError(f"part {part.part_number} starts beyond the end of {path}")
        headers = {**part.request.headers, "Content-Length": str(length)}
        bounds = request_timeout(timeouts, length)

        async def attempt() -> int:
            body = _slice(path, offset, length, limiter)
            async with http.put(part.request.url, data=body, headers=headers, timeout=bounds) as response:
                answer = await response.read()
                if response.status != 200:
                    check_status(f"{name} part {part.part_number}", response.status, answer)
            return length

        await with_retries(f"{name} part {part.part_number}", attempt, timeouts, length)
        sent += length
        on_bytes(length)

    try:
        await run_pieces(upload.parts, send, parallel, slots)
    except UrlExpired:
        raise UrlExpired(name, sent) from None  # the parts that went need no fresh URL
    return sent
