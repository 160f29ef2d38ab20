"""A misbehaving store: an HTTP/1.1 reverse proxy on 127.0.0.1 (ephemeral port) in front of the real
local S3 (or a peer) that forwards every request unchanged (Host header included, so presigned
signatures made for the proxy's host:port still verify upstream) and, per rules changed at runtime,
damages the requests that match one: corrupt bytes, short body, wrong Content-Length, 404/500/503,
reset mid-body, stall before the headers or during the body, slow drip, an answer late by
``SLOW_SECONDS`` but whole (``slow``: a saturated store), a PUT without its signed encryption headers
(``drop_sse``: a client that leaves out the headers its URL came with). With
``answer_like_aws_kms`` it also answers as AWS S3 does for SSE-KMS objects (which Ceph does not): ETags that are
not the MD5 of the bytes, ``x-amz-server-side-encryption: aws:kms`` on object answers, and a PUT's
``x-amz-checksum-sha256`` checked against the body on arrival, kept, and answered to a HEAD that asks
for it (``x-amz-checksum-mode: ENABLED``).

It runs on its own event loop in a daemon thread of the test process; every wait is bounded (a stall
lasts at most ``STALL_SECONDS`` or until ``stop``), and ``stop`` closes every connection."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import re
import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

#: The longest a stalled answer waits (far beyond every client bound the fault tests set).
STALL_SECONDS = 120.0
#: How late a ``slow`` answer starts (then it is relayed whole).
SLOW_SECONDS = 0.3
#: Seconds between the bytes of a slow drip.
DRIP_SECONDS = 0.5
#: Longest request or response head the proxy reads.
MAX_HEAD = 64 * 1024
CHUNK = 64 * 1024
IO_TIMEOUT = 60.0

FAULTS = (
    "corrupt",
    "short",
    "wrong_length",
    "404",
    "500",
    "503",
    "reset",
    "stall_headers",
    "stall_body",
    "drip",
    "drop_sse",
    "slow",
)
#: The store's own misbehaviours, which the store-fault matrix meets with every transfer class; not
#: ``drop_sse``, a client's fault that matters only against an encrypted bucket (test_encryption_refused.py),
#: nor ``slow``, which damages nothing (the admission test uses it: test_admission_slow_store.py).
STORE_FAULTS = tuple(fault for fault in FAULTS if fault not in ("drop_sse", "slow"))
STATUS_REASONS = {"404": "Not Found", "500": "Internal Server Error", "503": "Service Unavailable"}
S3_CODES = {"404": "NoSuchKey", "500": "InternalError", "503": "SlowDown"}
#: An ETag inside an XML answer (listings, listed parts, a completion), quoted either way.
_XML_ETAG = re.compile(rb"<ETag>(&quot;|\")?([0-9a-fA-F]+)(-\d+)?(&quot;|\")?</ETag>")
_HEADER_ETAG = re.compile(r'"?([0-9a-fA-F]+)(-\d+)?"?')


def opaque(etag: str) -> str:
    """The ETag AWS would show for an SSE-KMS object: as stable as the real one, and not its MD5."""
    return hashlib.md5(b"kms:" + etag.encode()).hexdigest()


class AwsKmsAnswers:
    """The answers of AWS S3 for SSE-KMS objects, made from the real store's: opaque ETags of objects
    (HEAD, GET, PUT, listings), the encryption header, and SHA-256 checksums checked, kept per object and
    answered on request. A multipart upload's listed parts keep the store's tags: the completion that
    quotes them is a signed body the proxy cannot change (a server configured for SSE-KMS holds listed
    part tags opaque by its setting, so they confirm sizes only either way)."""

    def __init__(self) -> None:
        self.checksums: dict[str, str] = {}  # object path -> base64 SHA-256 it arrived with

    def request(self, method: str, path: str, head: Head, body: bytes) -> bytes | None:
        """The request as the store gets it, or None when AWS would refuse it (a body that is not the
        checksum it carries)."""
        claimed = head.get("x-amz-checksum-sha256")
        computed = base64.b64encode(hashlib.sha256(body).digest()).decode()
        if method == "PUT" and claimed is not None and claimed != computed:
            return None
        return body

    def answer(self, method: str, path: str, asked: Head, answer: Head, body: bytes) -> bytes:
        """The store's answer as AWS gives it for an encrypted object."""
        status = int(answer.first.split(" ")[1])
        key = path.split("?", 1)[0]
        if status == 200 and method == "PUT" and "uploadId=" not in path:
            claimed = asked.get("x-amz-checksum-sha256")
            if claimed is None:
                self.checksums.pop(key, None)
            else:
                self.checksums[key] = claimed
        if status in (200, 204) and method == "DELETE":
            self.checksums.pop(key, None)
        etag = answer.get("ETag")
        if etag is not None and status in (200, 206):
            found = _HEADER_ETAG.fullmatch(etag)
            if found is not None:
                answer.set("ETag", f'"{opaque(found.group(1))}{found.group(2) or ""}"')
            answer.set("x-amz-server-side-encryption", "aws:kms")
        wants_checksum = (asked.get("x-amz-checksum-mode") or "").upper() == "ENABLED"
        if method == "HEAD" and status == 200 and wants_checksum and key in self.checksums:
            answer.set("x-amz-checksum-sha256", self.checksums[key])
        if body and b"<ETag>" in body and not (method == "GET" and "uploadId=" in path):

            def hidden(match: re.Match[bytes]) -> bytes:
                tag = opaque(match.group(2).decode()) + (match.group(3) or b"").decode()
                return b"<ETag>&quot;" + tag.encode() + b"&quot;</ETag>"

            body = _XML_ETAG.sub(hidden, body)
            answer.set("Content-Length", str(len(body)))
        return body


BAD_DIGEST = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>BadDigest</Code>'
    b"<Message>The SHA256 you specified did not match the calculated checksum.</Message></Error>"
)


@dataclass
class Rule:
    """Damage requests of ``method`` whose path contains ``key``: skip the first ``after`` matches,
    then damage ``times`` of them (None: every one)."""

    fault: str
    method: str = "GET"
    key: str = ""
    after: int = 0
    times: int | None = None
    seen: int = 0
    hits: int = 0

    def take(self, method: str, path: str) -> bool:
        if method != self.method or self.key not in path:
            return False
        self.seen += 1
        if self.seen <= self.after or (self.times is not None and self.hits >= self.times):
            return False
        self.hits += 1
        return True


@dataclass
class Head:
    """A parsed HTTP/1.1 request or response head."""

    first: str
    headers: list[tuple[str, str]] = field(default_factory=list)

    def get(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    def set(self, name: str, value: str) -> None:
        self.headers = [(k, v) for k, v in self.headers if k.lower() != name.lower()] + [(name, value)]

    def encode(self) -> bytes:
        lines = [self.first, *(f"{k}: {v}" for k, v in self.headers)]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def read_head(reader: asyncio.StreamReader) -> Head | None:
    try:
        raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IO_TIMEOUT)
    except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None
    lines = raw.decode("latin-1").split("\r\n")
    headers = [tuple(x.strip() for x in line.split(":", 1)) for line in lines[1:] if ":" in line]
    return Head(lines[0], [(k, v) for k, v in headers])


async def read_body(reader: asyncio.StreamReader, head: Head, until_close: bool) -> bytes:
    """The whole body a head announces (Content-Length, chunked, or, for a response, until close).
    Chunked bodies are returned de-chunked; the caller re-frames with Content-Length."""
    length = head.get("Content-Length")
    if length is not None:
        return await asyncio.wait_for(reader.readexactly(int(length)), IO_TIMEOUT)
    if (head.get("Transfer-Encoding") or "").lower() == "chunked":
        parts = []
        while True:
            size = int((await asyncio.wait_for(reader.readline(), IO_TIMEOUT)).split(b";")[0].strip(), 16)
            if size == 0:
                while (await asyncio.wait_for(reader.readline(), IO_TIMEOUT)).strip():
                    pass
                break
            parts.append(await asyncio.wait_for(reader.readexactly(size), IO_TIMEOUT))
            await asyncio.wait_for(reader.readline(), IO_TIMEOUT)
        head.headers = [(k, v) for k, v in head.headers if k.lower() != "transfer-encoding"]
        head.set("Content-Length", str(sum(map(len, parts))))
        return b"".join(parts)
    if until_close:
        return await asyncio.wait_for(reader.read(), IO_TIMEOUT)
    return b""


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP RST (SO_LINGER 0), not a FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class Proxy:
    """The misbehaving store. ``url`` is what the server presigns for; ``rules`` change at runtime."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.rules: list[Rule] = []
        self.requests: list[tuple[str, str, str]] = []  # (method, path, fault or "")
        self.lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        self.stopping = asyncio.Event()
        self.writers: set[asyncio.StreamWriter] = set()
        self.kms: AwsKmsAnswers | None = None
        started = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self.thread.start()
        if not started.wait(10):
            raise RuntimeError("fault proxy did not start")
        self.url = f"http://127.0.0.1:{self.port}"

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = int(self.server.sockets[0].getsockname()[1])
        self.stopping = asyncio.Event()
        started.set()
        self.loop.run_until_complete(self.stopping.wait())
        self.server.close()
        for writer in list(self.writers):
            writer.transport.abort()
        self.loop.run_until_complete(asyncio.sleep(0.05))
        self.loop.close()

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.stopping.set)
        self.thread.join(10)

    def answer_like_aws_kms(self) -> AwsKmsAnswers:
        """From now on, answer as AWS does for SSE-KMS objects (see :class:`AwsKmsAnswers`)."""
        with self.lock:
            self.kms = AwsKmsAnswers()
            return self.kms

    def set_rules(self, *rules: Rule) -> None:
        with self.lock:
            self.rules = list(rules)

    def hits(self) -> int:
        with self.lock:
            return sum(rule.hits for rule in self.rules)

    def _match(self, method: str, path: str) -> str | None:
        with self.lock:
            fault = next((rule.fault for rule in self.rules if rule.take(method, path)), None)
            self.requests.append((method, path, fault or ""))
            return fault

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        try:
            while not self.stopping.is_set():
                head = await read_head(reader)
                if head is None:
                    break
                keep = await self._exchange(head, reader, writer)
                if not keep:
                    break
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            self.writers.discard(writer)
            writer.transport.abort() if writer.transport.is_closing() else writer.close()

    async def _exchange(self, head: Head, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Forward one request and relay (or damage) its answer; False: close the client connection."""
        method, path = ([*head.first.split(" "), "", ""])[:2]
        if (head.get("Expect") or "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            head.headers = [(k, v) for k, v in head.headers if k.lower() != "expect"]
        body = await read_body(reader, head, until_close=False)
        fault = self._match(method, path)
        if fault == "slow":
            await asyncio.sleep(SLOW_SECONDS)
            fault = None
        if fault in STATUS_REASONS:
            await self._status(writer, fault)
            return True
        if fault == "stall_headers":
            await self._stall()
            return False
        if method == "PUT" and fault is not None:
            return await self._damage_put(fault, head, body, writer)
        kms = self.kms if fault is None else None
        sent = body if kms is None else kms.request(method, path, head, body)
        if sent is None:  # AWS checks a checksum on arrival and keeps nothing
            refused = Head("HTTP/1.1 400 Bad Request", [("Content-Length", str(len(BAD_DIGEST)))])
            writer.write(refused.encode() + BAD_DIGEST)
            await writer.drain()
            return True
        answer, answer_body = await self._forward(head, sent)
        if kms is not None:
            answer_body = kms.answer(method, path, head, answer, answer_body)
        if fault is None or method == "HEAD":
            writer.write(answer.encode() + answer_body)
            await writer.drain()
            return (answer.get("Connection") or "").lower() != "close"
        await self._damage_get(fault, answer, answer_body, writer)
        return False

    async def _forward(self, head: Head, body: bytes) -> tuple[Head, bytes]:
        up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(*self.upstream), IO_TIMEOUT)
        try:
            up_writer.write(head.encode() + body)
            await up_writer.drain()
            answer = await read_head(up_reader)
            if answer is None:
                raise ConnectionError("upstream closed")
            method = head.first.split(" ")[0]
            status = int(answer.first.split(" ")[1])
            no_body = method == "HEAD" or status in (204, 304) or 100 <= status < 200
            answer_body = b"" if no_body else await read_body(up_reader, answer, until_close=True)
            if not no_body and answer.get("Content-Length") is None:
                answer.set("Content-Length", str(len(answer_body)))
            return answer, answer_body
        finally:
            up_writer.transport.abort()

    async def _status(self, writer: asyncio.StreamWriter, fault: str) -> None:
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{S3_CODES[fault]}</Code>'
            f"<Message>injected {fault}</Message></Error>"
        ).encode()
        head = Head(
            f"HTTP/1.1 {fault} {STATUS_REASONS[fault]}",
            [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))],
        )
        writer.write(head.encode() + body)
        await writer.drain()

    async def _stall(self) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), STALL_SECONDS)

    async def _damage_get(self, fault: str, answer: Head, body: bytes, writer: asyncio.StreamWriter) -> None:
        half = len(body) // 2
        if fault == "corrupt" and body:
            body = body[:half] + bytes([body[half] ^ 0xFF]) + body[half + 1 :]
        if fault == "wrong_length":
            # announce one byte less than is there and send just that: a short object, well framed
            answer.set("Content-Length", str(max(0, len(body) - 1)))
            body = body[:-1]
        if fault in ("corrupt", "wrong_length"):
            writer.write(answer.encode() + body)
            await writer.drain()
            return
        writer.write(answer.encode() + body[:half])
        await writer.drain()
        if fault == "reset":
            reset(writer)
        elif fault == "stall_body":
            await self._stall()
        elif fault == "drip":
            await self._drip(writer, body[half:])
        # "short": close early (the FIN of the finally in _serve)

    async def _drip(self, writer: asyncio.StreamWriter, rest: bytes) -> None:
        deadline = self.loop.time() + STALL_SECONDS
        for byte in _bytes(rest):
            if self.stopping.is_set() or self.loop.time() > deadline:
                return
            writer.write(byte)
            await writer.drain()
            await asyncio.sleep(DRIP_SECONDS)

    async def _damage_put(self, fault: str, head: Head, body: bytes, writer: asyncio.StreamWriter) -> bool:
        """An upload: bytes changed on the way (S3 must refuse them), or an answer damaged or withheld."""
        if fault == "corrupt" and body:
            half = len(body) // 2
            body = body[:half] + bytes([body[half] ^ 0xFF]) + body[half + 1 :]
        if fault == "wrong_length" and body:
            body = body[:-1]
            head.set("Content-Length", str(len(body)))
        if fault == "drop_sse":
            head.headers = [(k, v) for k, v in head.headers if not k.lower().startswith("x-amz-server-side-encryption")]
        if fault in ("corrupt", "wrong_length", "drop_sse"):
            answer, answer_body = await self._forward(head, body)
            writer.write(answer.encode() + answer_body)
            await writer.drain()
            return True
        if fault == "short":
            return False  # the upload never reached the store: close without an answer
        if fault == "reset":
            reset(writer)
            return False
        answer, answer_body = await self._forward(head, body)  # stored, but the answer is lost
        if fault == "stall_body":
            writer.write(answer.encode()[: len(answer.first) + 2])
            await writer.drain()
            await self._stall()
        elif fault == "drip":
            await self._drip(writer, answer.encode() + answer_body)
        return False


def _bytes(data: bytes) -> Iterator[bytes]:
    for i in range(len(data)):
        yield data[i : i + 1]
