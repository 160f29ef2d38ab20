"""The libcurl implementation of ``ObjectTransport``: libcurl's multi interface (pycurl) driven by the asyncio
loop, with no thread. It moves every object to or from storage's presigned URLs (see
``choice.open_transport``).

Why: a 4 KiB object costs aiohttp about 150-220 µs of client CPU per request here (building the
request, parsing the answer, its futures and timers), libcurl about 50 µs (measured: 2,000 GETs at
16 in parallel against the local Ceph gateway, 0.30-0.45 s against 0.09-0.11 s of CPU), and on a
2-core machine the client's CPU is taken from the gateway's; large bodies cost it fewer, larger
callbacks (see scripts/bench_transport.py). libcurl tells us which sockets to watch
(``M_SOCKETFUNCTION``) and when to wake it (``M_TIMERFUNCTION``); the loop watches them with
``add_reader``/``add_writer`` and hands each event back (``socket_action``). Connections are kept
alive in the multi handle's pool, at most ``parallel`` of them. A body from a file range is read by
libcurl's read callback as the socket takes it.

Bounds: the connect timeout, and a total per attempt (``Timeouts.object_seconds``), are libcurl's own;
"no byte for ``read`` seconds" is libcurl's low-speed check (under 1 byte/s for that long), which has
whole-second resolution, so the read timeout is rounded up to the next second here. libcurl's
callbacks cannot wait, so this transport never carries a rate-limited transfer.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import math
from collections.abc import Callable
from functools import partial
from typing import BinaryIO

import pycurl

from smart_transfer.transfer.errors import StorageStalled, StorageUnreachable
from smart_transfer.transfer.transport import Answer, Body, BodyTooLarge, Call, Gathered, ObjectTransport, Sink

#: libcurl's codes for an attempt that ran out of time, and for a write callback that refused bytes.
_TIMED_OUT = 28
_WRITE_REFUSED = 23
#: libcurl's send buffer for a body read from a file (its largest is 2 MiB; the default, 64 KiB, costs
#: a streamed upload one read callback and one loop wake-up per 64 KiB).
UPLOAD_BUFFER_BYTES = 2 * 1024 * 1024


class _Exchange:
    """One request in flight: its future, its headers, and the body as it arrives (at most
    ``max_bytes``), kept or handed to the sink in pieces (``Gathered``)."""

    __slots__ = ("chunks", "failed", "future", "gathered", "headers", "max_bytes", "received", "status")

    def __init__(self, future: asyncio.Future[Answer], max_bytes: int, sink: Sink | None) -> None:
        self.future = future
        self.max_bytes = max_bytes
        self.gathered = Gathered(sink) if sink is not None else None
        self.chunks: list[bytes] = []
        self.headers: dict[str, str] = {}
        self.status = 0
        self.received = 0
        self.failed: Exception | None = None

    def header(self, line: bytes) -> None:
        text = line.decode("latin-1").strip()
        if text.startswith("HTTP/"):
            self.status = int(text.split()[1])
            self.headers.clear()  # a new block of headers (after a 100 Continue, or a redirect)
        elif ":" in text:
            name, value = text.split(":", 1)
            self.headers[name.strip().lower()] = value.strip()

    def write(self, chunk: bytes) -> int | None:
        self.received += len(chunk)
        if self.received > self.max_bytes:
            return 0  # libcurl ends the transfer with a write error: nothing more is read
        if self.gathered is None or self.status != self.gathered.sink.status:
            self.chunks.append(chunk)
            return None
        return None if self._to_sink(partial(self.gathered.add, chunk)) else 0

    def flush(self) -> bool:
        """Hand the sink what is left of its answer; False when it raised (the exchange fails with it)."""
        return self.gathered is None or self._to_sink(self.gathered.flush)

    def _to_sink(self, step: Callable[[], object]) -> bool:
        try:
            step()
        except Exception as exc:
            # raised in a libcurl callback it would be lost: the exchange fails with it instead
            self.failed = exc
            return False
        return True

    def reader(self, source: BinaryIO, remaining: int) -> Callable[[int], bytes | int]:
        """libcurl's read callback for a body of ``remaining`` bytes of ``source``: a read that fails
        (or a file that ends early) aborts the transfer and fails the exchange with its error."""

        def read(size: int) -> bytes | int:
            nonlocal remaining
            try:
                chunk = source.read(min(size, remaining))
                if remaining and not chunk:
                    raise ValueError(f"{source.name} is shorter than the range to send")
            except Exception as exc:
                self.failed = exc
                return int(pycurl.READFUNC_ABORT)
            remaining -= len(chunk)
            return chunk

        return read


class CurlEngine(ObjectTransport):
    """Runs HTTP exchanges on one libcurl multi handle, on the running loop (create it there)."""

    def __init__(self, parallel: int) -> None:
        self._loop = asyncio.get_running_loop()
        self._multi = pycurl.CurlMulti()
        self._multi.setopt(pycurl.M_SOCKETFUNCTION, self._on_socket)
        self._multi.setopt(pycurl.M_TIMERFUNCTION, self._on_timer)
        self._multi.setopt(pycurl.M_MAX_TOTAL_CONNECTIONS, parallel)
        self._multi.setopt(pycurl.M_MAX_HOST_CONNECTIONS, parallel)
        self._multi.setopt(pycurl.M_MAXCONNECTS, parallel)
        self._timer: asyncio.TimerHandle | None = None
        self._watched: set[int] = set()
        self._idle: list[pycurl.Curl] = []
        self._busy: dict[pycurl.Curl, _Exchange] = {}

    # -- what libcurl asks of the loop -------------------------------------------------------------

    def _on_socket(self, what: int, fd: int, multi: object, data: object) -> None:
        loop = self._loop
        if what == pycurl.POLL_REMOVE:
            self._unwatch(fd)
            return
        # libcurl may close a socket and open another with the same number without a POLL_REMOVE in
        # between; the kernel dropped the old one from epoll, but the loop's selector still holds it
        # and would only "modify" it (not register the new socket) when the events are the same.
        # Removing first makes every change a fresh registration.
        self._unwatch(fd)
        self._watched.add(fd)
        if what in (pycurl.POLL_IN, pycurl.POLL_INOUT):
            loop.add_reader(fd, self._act, fd, pycurl.CSELECT_IN)
        if what in (pycurl.POLL_OUT, pycurl.POLL_INOUT):
            loop.add_writer(fd, self._act, fd, pycurl.CSELECT_OUT)

    def _unwatch(self, fd: int) -> None:
        if fd in self._watched:
            self._watched.discard(fd)
            self._loop.remove_reader(fd)
            self._loop.remove_writer(fd)

    def _on_timer(self, milliseconds: int) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if milliseconds >= 0:
            self._timer = self._loop.call_later(milliseconds / 1000, self._act, pycurl.SOCKET_TIMEOUT, 0)

    def _act(self, fd: int, event: int) -> None:
        try:
            while True:
                status, _ = self._multi.socket_action(fd, event)
                if status != pycurl.E_CALL_MULTI_PERFORM:
                    break
            self._collect()
        except Exception as exc:
            # raised in a loop callback, it would only be logged and the exchanges it was to complete
            # would wait forever: every exchange in flight fails with it instead
            self._fail_all(exc)
            raise

    def _fail_all(self, exc: Exception) -> None:
        for handle, exchange in list(self._busy.items()):
            del self._busy[handle]
            with contextlib.suppress(pycurl.error):
                self._multi.remove_handle(handle)
            handle.close()
            if not exchange.future.done():
                exchange.future.set_exception(StorageUnreachable(f"libcurl engine failed: {exc}"))

    def _collect(self) -> None:
        while True:
            queued, done, failed = self._multi.info_read()
            for handle in done:
                self._settle(handle, None)
            for handle, code, message in failed:
                self._settle(handle, (code, message))
            if not queued:
                return

    def _settle(self, handle: pycurl.Curl, failure: tuple[int, str] | None) -> None:
        exchange = self._busy.pop(handle)
        self._multi.remove_handle(handle)
        if failure is None and not exchange.flush():  # the last piece of a sink's answer
            failure = (_WRITE_REFUSED, "the sink refused the last bytes")
        if not exchange.future.done():
            if failure is None:
                status = handle.getinfo(pycurl.RESPONSE_CODE)
                answer = Answer(status, b"".join(exchange.chunks), exchange.headers)
                exchange.future.set_result(answer)
            else:
                exchange.future.set_exception(_error(handle, exchange, *failure))
        handle.reset()
        self._idle.append(handle)

    # -- exchanges ---------------------------------------------------------------------------------

    async def exchange(self, call: Call) -> Answer:
        """See ``ObjectTransport.exchange``: a GET, or a PUT of ``call.body``. The answer's headers are
        collected only for a call with a sink (parsing them costs a small object a fifth of its CPU)."""
        if (call.method, call.body is None) not in (("GET", True), ("PUT", False)):
            raise ValueError(f"libcurl exchanges are GETs or PUTs with a body, not {call.method}")
        handle = self._idle.pop() if self._idle else pycurl.Curl()
        exchange = _Exchange(self._loop.create_future(), call.max_bytes, call.sink)
        with contextlib.ExitStack() as stack:
            _configure(handle, call, exchange.write)
            if call.body is not None:
                _send(handle, call.body, exchange, stack)
            if call.sink is not None:
                handle.setopt(pycurl.HEADERFUNCTION, exchange.header)
                handle.setopt(pycurl.BUFFERSIZE, call.sink.buffer_bytes)
            self._busy[handle] = exchange
            self._multi.add_handle(handle)
            try:
                return await exchange.future
            finally:
                # still ours: cancelled while in flight (a settled handle may already serve another)
                if self._busy.get(handle) is exchange:
                    del self._busy[handle]
                    self._multi.remove_handle(handle)
                    handle.close()

    def close(self) -> None:
        """Stop every exchange in flight and close the connections."""
        if self._timer is not None:
            self._timer.cancel()
        for handle in list(self._busy):
            self._multi.remove_handle(handle)
            handle.close()
        self._busy.clear()
        for handle in self._idle:
            handle.close()
        self._idle.clear()
        self._multi.close()  # closes the pooled connections (each is unwatched through POLL_REMOVE)
        for fd in list(self._watched):
            self._unwatch(fd)


def _configure(handle: pycurl.Curl, call: Call, write: Callable[[bytes], int | None]) -> None:
    """Set up ``handle`` for one attempt: exact bytes (no decompression, no proxy from the
    environment, no headers of libcurl's own beyond Host, Content-Length and Accept)."""
    listed = [f"{name}: {value}" for name, value in call.headers.items()]
    if "Expect" not in call.headers:
        listed.append("Expect:")  # an empty value: libcurl adds none of its own
    timeouts = call.timeouts
    handle.setopt(pycurl.URL, call.url)
    handle.setopt(pycurl.HTTPHEADER, listed)
    handle.setopt(pycurl.WRITEFUNCTION, write)
    handle.setopt(pycurl.NOSIGNAL, 1)
    handle.setopt(pycurl.PROXY, "")
    handle.setopt(pycurl.CONNECTTIMEOUT_MS, max(1, int(timeouts.connect * 1000)))
    handle.setopt(pycurl.TIMEOUT_MS, max(1, int(timeouts.object_seconds(call.size) * 1000)))
    handle.setopt(pycurl.LOW_SPEED_LIMIT, 1)
    handle.setopt(pycurl.LOW_SPEED_TIME, max(1, math.ceil(timeouts.read)))


def _send(handle: pycurl.Curl, body: Body, exchange: _Exchange, stack: contextlib.ExitStack) -> None:
    """PUT ``body`` with its Content-Length: bytes from memory, a file range read as the socket takes
    it (the file stays open until the exchange ends)."""
    handle.setopt(pycurl.UPLOAD, 1)
    if isinstance(body, bytes):
        handle.setopt(pycurl.READFUNCTION, io.BytesIO(body).read)
        handle.setopt(pycurl.INFILESIZE_LARGE, len(body))
        return
    source = stack.enter_context(open(body.path, "rb"))  # noqa: SIM115 - closed with the exchange
    source.seek(body.offset)
    handle.setopt(pycurl.READFUNCTION, exchange.reader(source, body.length))
    handle.setopt(pycurl.INFILESIZE_LARGE, body.length)
    handle.setopt(pycurl.UPLOAD_BUFFERSIZE, UPLOAD_BUFFER_BYTES)


def _error(handle: pycurl.Curl, exchange: _Exchange, code: int, message: str) -> Exception:
    """What a failed attempt means, in the terms ``http.with_retries`` retries on."""
    if exchange.failed is not None:
        return exchange.failed
    if code == _WRITE_REFUSED and exchange.received > exchange.max_bytes:
        return BodyTooLarge(exchange.max_bytes)
    if code == _TIMED_OUT and handle.getinfo(pycurl.CONNECT_TIME) > 0:
        return StorageStalled(message, no_byte="too slow" in message.lower())
    return StorageUnreachable(message or f"libcurl error {code}")
