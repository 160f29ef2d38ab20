"""Both object transports (libcurl: transfer/curl.py, aiohttp: transfer/aio.py) against a real HTTP
server on 127.0.0.1 that misbehaves on purpose: each failure must end the same way through either
(retried, bounded, typed), only verified bytes come back, and uploads send exactly the file (or its
range) with the signed headers."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from smart_transfer.model import Multihash
from smart_transfer.protocol.messages import HttpRequest, MultipartUpload, UploadPart
from smart_transfer.transfer.choice import open_library
from smart_transfer.transfer.errors import TransferFailed
from smart_transfer.transfer.http import download, download_bytes, upload
from smart_transfer.transfer.limits import Timeouts
from smart_transfer.transfer.multipart import upload_parts
from smart_transfer.transfer.transport import LIBRARIES, Answer, Call, Sink
from smart_transfer.transfer.writer import pwrite_all

BODY = b"x" * 4096
HASH = Multihash.of(BODY)
Reply = Callable[[int, bytes], Awaitable[bytes | None]]
KINDS = pytest.mark.parametrize("kind", LIBRARIES)


async def _serve(reply: Reply) -> tuple[asyncio.Server, str, list[bytes]]:
    """A server answering request ``n`` (from 1) with what ``reply`` returns (None: never answer)."""
    heads: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while head := await reader.readuntil(b"\r\n\r\n"):
            heads.append(head)
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.lower().split(b"\r\n")
                    if line.startswith(b"content-length:")
                ),
                0,
            )
            body = await reader.readexactly(length)
            answer = await reply(len(heads), body)
            if answer is None:
                await asyncio.sleep(3600)
            writer.write(answer or b"")
            await writer.drain()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/object", heads


def _answer(status: int, body: bytes) -> bytes:
    return b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n\r\n%s" % (status, len(body), body)


async def _get(
    kind: str, reply: Reply, timeouts: Timeouts, into: Path | None = None
) -> tuple[bytes | BaseException, list[bytes], float]:
    """A download through ``kind``: into memory, or streamed into the file ``into`` (returning its bytes)."""
    server, url, heads = await _serve(reply)
    started = time.monotonic()
    request = HttpRequest(method="GET", url=url, headers={}, expires_at=0)
    try:
        async with open_library(kind, 4) as transport:
            if into is None:
                result: bytes | BaseException = await download_bytes(
                    transport, request, HASH, len(BODY), lambda _: None, timeouts
                )
            else:
                verified = await download(transport, request, HASH, len(BODY), into, lambda _: None, timeouts)
                result = verified.temp_path.read_bytes()
    except TransferFailed as exc:
        result = exc
    finally:
        server.close()
    return result, heads, time.monotonic() - started


@KINDS
@pytest.mark.parametrize("streamed", [False, True])
def test_verified_bytes_come_back_and_a_failing_store_is_retried(kind: str, streamed: bool, tmp_path: Path) -> None:
    async def reply(number: int, _: bytes) -> bytes:
        return _answer(503, b"busy") if number < 3 else _answer(200, BODY)

    into = tmp_path / "object" if streamed else None
    result, heads, _ = asyncio.run(_get(kind, reply, Timeouts(attempts=3), into))
    assert result == BODY and len(heads) == 3


@pytest.mark.parametrize(
    ("body", "reason"),
    [(BODY + b"y", "larger than the 4096 bytes"), (b"z" * 4096, "does not match"), (BODY[:-1], "")],
)
@KINDS
@pytest.mark.parametrize("streamed", [False, True])
def test_wrong_bytes_are_refused(kind: str, streamed: bool, body: bytes, reason: str, tmp_path: Path) -> None:
    async def reply(number: int, _: bytes) -> bytes:
        return _answer(200, body)

    into = tmp_path / "object" if streamed else None
    result, _, _ = asyncio.run(_get(kind, reply, Timeouts(attempts=1), into))
    assert isinstance(result, TransferFailed) and reason in result.reason, result
    assert into is None or not into.exists()  # nothing unverified is left behind


@KINDS
def test_a_store_that_stops_answering_fails_within_its_bounds(kind: str) -> None:
    async def reply(number: int, _: bytes) -> None:
        return None

    timeouts = Timeouts(connect=1, read=1, attempts=2)
    result, heads, seconds = asyncio.run(_get(kind, reply, timeouts))
    assert isinstance(result, TransferFailed) and result.stalled and "stopped answering" in str(result), result
    assert len(heads) == 2 and seconds < timeouts.stall_bound() + 2


@KINDS
def test_an_unreachable_store_is_reported_as_such(kind: str) -> None:
    async def run() -> BaseException:
        try:
            async with open_library(kind, 2) as transport:
                request = HttpRequest(method="GET", url="http://127.0.0.1:9/object", headers={}, expires_at=0)
                await download_bytes(transport, request, HASH, len(BODY), lambda _: None, Timeouts(attempts=2))
        except TransferFailed as exc:
            return exc
        raise AssertionError("the download succeeded")

    result = asyncio.run(run())
    assert isinstance(result, TransferFailed) and result.network and "storage unreachable" in str(result)


@KINDS
@pytest.mark.parametrize("size", [len(BODY), 3 * 1024 * 1024])
def test_an_upload_sends_the_signed_headers_and_exactly_the_file(kind: str, size: int, tmp_path: Path) -> None:
    """A small file goes from memory, a larger one streams from disk (libcurl: its read callback)."""
    source = tmp_path / "object"
    source.write_bytes(bytes(range(256)) * (size // 256))
    received: list[bytes] = []

    async def reply(number: int, body: bytes) -> bytes:
        received.append(body)
        return _answer(200, b"")

    async def run() -> tuple[int, list[bytes]]:
        server, url, heads = await _serve(reply)
        try:
            async with open_library(kind, 2) as transport:
                request = HttpRequest(method="PUT", url=url, headers={"Content-MD5": "abc"}, expires_at=0)
                sent = await upload(transport, request, "object", source, lambda _: None, size_hint=size)
        finally:
            server.close()
        return sent, heads

    sent, heads = asyncio.run(run())
    head = heads[0].lower()
    assert sent == size and received == [source.read_bytes()]
    assert head.startswith(b"put /object") and b"content-md5: abc" in head and b"expect" not in head
    assert f"content-length: {size}".encode() in head


@KINDS
def test_parts_send_exactly_their_range_of_the_file(kind: str, tmp_path: Path) -> None:
    """Each part is its slice of the file, from the part's offset, with the part's own headers."""
    part_size = 1024 * 1024
    data = os.urandom(5 * part_size // 2)  # two and a half parts, each unlike the others
    source = tmp_path / "object"
    source.write_bytes(data)
    received: list[bytes] = []

    async def reply(number: int, body: bytes) -> bytes:
        received.append(body)
        return _answer(200, b"")

    async def run() -> tuple[int, list[bytes]]:
        server, url, heads = await _serve(reply)
        parts = [
            UploadPart(part_number=n, request=HttpRequest(method="PUT", url=f"{url}/{n}", headers={}, expires_at=0))
            for n in (1, 2, 3)
        ]
        upload_ = MultipartUpload(upload_id="u", part_size=part_size, parts=parts)
        try:
            async with open_library(kind, 2) as transport:
                sent = await upload_parts(transport, upload_, "object", source, lambda _: None, parallel=2)
        finally:
            server.close()
        return sent, heads

    sent, heads = asyncio.run(run())
    slices = [data[:part_size], data[part_size : 2 * part_size], data[2 * part_size :]]
    assert sent == len(data) and sorted(received) == sorted(slices)
    assert sorted(head.split(b" ")[1] for head in heads) == [b"/object/1", b"/object/2", b"/object/3"]


@KINDS
def test_a_streamed_body_reaches_its_sink_in_few_large_pieces(kind: str) -> None:
    """libcurl hands its callback 16 KiB at a time: the engine gathers them, so a sink is called about
    once per ``buffer_bytes`` (a thread hand-off each in a download), with every byte in order."""
    body = os.urandom(8 * 1024 * 1024 + 3)
    buffer_bytes = 1024 * 1024
    pieces: list[list[bytes]] = []

    async def reply(_: int, __: bytes) -> bytes:
        return _answer(200, body)

    async def scenario() -> Answer:
        server, url, _ = await _serve(reply)
        try:
            async with open_library(kind, 4) as transport:
                sink = Sink(pieces.append, 200, buffer_bytes)
                return await transport.exchange(Call("GET", url, {}, Timeouts(), len(body), len(body), sink=sink))
        finally:
            server.close()

    answer = asyncio.run(scenario())
    assert answer.status == 200 and answer.body == b""  # every byte went to the sink
    assert b"".join(chunk for piece in pieces for chunk in piece) == body
    assert len(pieces) <= len(body) // buffer_bytes + 2, [sum(map(len, piece)) for piece in pieces]


def test_a_vectored_write_that_stops_short_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chunks = [os.urandom(size) for size in (5, 0, 70_000, 1, 4096)] * 300  # more than IOV_MAX chunks
    real = os.pwritev

    def short(fd: int, buffers: list[bytes], offset: int) -> int:  # at most 10,000 bytes a call
        return real(fd, [b"".join(buffers)[:10_000]], offset)

    monkeypatch.setattr(os, "pwritev", short)
    path = tmp_path / "staging"
    path.write_bytes(b"-" * 7)
    fd = os.open(path, os.O_RDWR)
    try:
        pwrite_all(fd, chunks, 7)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"-" * 7 + b"".join(chunks)
