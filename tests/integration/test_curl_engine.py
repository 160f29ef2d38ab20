"""The libcurl engine for small objects (transfer/curl.py) against a real HTTP server on 127.0.0.1 that
misbehaves on purpose: each failure must end as the aiohttp path ends it (retried, bounded, typed), and
only verified bytes come back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from smart_transfer.model import Multihash
from smart_transfer.protocol.messages import HttpRequest
from smart_transfer.transfer.curl import CurlEngine
from smart_transfer.transfer.errors import TransferFailed
from smart_transfer.transfer.http import download_bytes, make_session, upload
from smart_transfer.transfer.limits import Timeouts

BODY = b"x" * 4096
HASH = Multihash.of(BODY)
Reply = Callable[[int, bytes], Awaitable[bytes | None]]


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


async def _get(reply: Reply, timeouts: Timeouts) -> tuple[bytes | BaseException, list[bytes], float]:
    server, url, heads = await _serve(reply)
    engine = CurlEngine(4)
    started = time.monotonic()
    try:
        async with make_session(4) as http:
            result: bytes | BaseException = await download_bytes(
                http,
                HttpRequest(method="GET", url=url, headers={}, expires_at=0),
                HASH,
                len(BODY),
                lambda _: None,
                timeouts,
                engine=engine,
            )
    except TransferFailed as exc:
        result = exc
    finally:
        engine.close()
        server.close()
    return result, heads, time.monotonic() - started


def test_verified_bytes_come_back_and_a_failing_store_is_retried() -> None:
    async def reply(number: int, _: bytes) -> bytes:
        return _answer(503, b"busy") if number < 3 else _answer(200, BODY)

    result, heads, _ = asyncio.run(_get(reply, Timeouts(attempts=3)))
    assert result == BODY and len(heads) == 3


@pytest.mark.parametrize(
    ("body", "reason"),
    [(BODY + b"y", "larger than the 4096 bytes"), (b"z" * 4096, "does not match"), (BODY[:-1], "")],
)
def test_wrong_bytes_are_refused(body: bytes, reason: str) -> None:
    async def reply(number: int, _: bytes) -> bytes:
        return _answer(200, body)

    result, _, _ = asyncio.run(_get(reply, Timeouts(attempts=1)))
    assert isinstance(result, TransferFailed) and reason in result.reason, result


def test_a_store_that_stops_answering_fails_within_its_bounds() -> None:
    async def reply(number: int, _: bytes) -> None:
        return None

    timeouts = Timeouts(connect=1, read=1, attempts=2)
    result, heads, seconds = asyncio.run(_get(reply, timeouts))
    assert isinstance(result, TransferFailed) and result.stalled and "stopped answering" in str(result), result
    assert len(heads) == 2 and seconds < timeouts.stall_bound() + 2


def test_an_unreachable_store_is_reported_as_such() -> None:
    async def run() -> BaseException:
        engine = CurlEngine(2)
        try:
            async with make_session(2) as http:
                request = HttpRequest(method="GET", url="http://127.0.0.1:9/object", headers={}, expires_at=0)
                await download_bytes(
                    http, request, HASH, len(BODY), lambda _: None, Timeouts(attempts=2), engine=engine
                )
        except TransferFailed as exc:
            return exc
        finally:
            engine.close()
        raise AssertionError("the download succeeded")

    result = asyncio.run(run())
    assert isinstance(result, TransferFailed) and result.network and "storage unreachable" in str(result)


def test_an_upload_sends_the_signed_headers_and_exactly_the_file(tmp_path: Path) -> None:
    source = tmp_path / "object"
    source.write_bytes(BODY)
    received: list[bytes] = []

    async def reply(number: int, body: bytes) -> bytes:
        received.append(body)
        return _answer(200, b"")

    async def run() -> tuple[int, list[bytes]]:
        server, url, heads = await _serve(reply)
        engine = CurlEngine(2)
        try:
            async with make_session(2) as http:
                request = HttpRequest(method="PUT", url=url, headers={"Content-MD5": "abc"}, expires_at=0)
                sent = await upload(http, request, "object", source, lambda _: None, engine=engine, size_hint=len(BODY))
        finally:
            engine.close()
            server.close()
        return sent, heads

    sent, heads = asyncio.run(run())
    head = heads[0].lower()
    assert sent == len(BODY) and received == [BODY]
    assert head.startswith(b"put /object") and b"content-md5: abc" in head and b"expect" not in head
