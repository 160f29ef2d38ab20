"""Uploads of large objects in parts: each part the server handed out is PUT to its presigned URL
(Content-MD5 bound into it) straight from its slice of the file, several at a time. Parts the store
already holds were left out by the server, so a push killed midway sends only the rest; a refused URL
(expired) raises UrlExpired, and the server's fresh answer names only the parts still missing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from smart_transfer.protocol.messages import MultipartUpload, UploadPart
from smart_transfer.transfer.errors import UrlExpired
from smart_transfer.transfer.http import exchange_once, with_retries
from smart_transfer.transfer.limits import Timeouts
from smart_transfer.transfer.pieces import run_pieces
from smart_transfer.transfer.transport import FileRange, ObjectTransport


async def upload_parts(
    transport: ObjectTransport,
    upload: MultipartUpload,
    name: str,
    path: Path,
    on_bytes: Callable[[int], None],
    *,
    parallel: int,
    timeouts: Timeouts | None = None,
    slots: asyncio.Semaphore | None = None,
) -> int:
    """PUT every part of ``upload`` from its range of the file at ``path`` over ``transport``,
    ``parallel`` at a time (sharing ``slots`` with the other transfers); returns the bytes sent."""
    timeouts = timeouts or Timeouts()
    size = path.stat().st_size
    sent = 0

    async def send(part: UploadPart) -> None:
        nonlocal sent
        offset = (part.part_number - 1) * upload.part_size
        length = min(upload.part_size, size - offset)
        if length <= 0:
            raise ValueError(f"part {part.part_number} starts beyond the end of {path}")
        label = f"{name} part {part.part_number}"

        async def attempt() -> int:
            body = FileRange(path, offset, length)
            await exchange_once(transport, label, part.request, timeouts, length, accepted=(200,), body=body)
            return length

        await with_retries(label, attempt, timeouts, length)
        sent += length
        on_bytes(length)

    try:
        await run_pieces(upload.parts, send, parallel, slots)
    except UrlExpired as refused:
        raise UrlExpired(name, sent, refused.refusal) from None  # the parts that went need no fresh URL
    return sent
