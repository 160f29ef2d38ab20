"""The client's WebSocket driver: I/O around one protocol ``Connection``, over ``websockets``. Sends
and receives are serialized by a lock so that a background keep-alive can share the session."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Self, TypeVar

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.typing import Subprotocol

from smart_transfer.client.options import DEFAULT_ANSWER_TIMEOUT
from smart_transfer.client.remote import redact
from smart_transfer.errors import LocalError, RemoteError, SmartTransferError, from_protocol
from smart_transfer.protocol import SUBPROTOCOL, authorization
from smart_transfer.protocol.codes import ErrorCode, code_of_status
from smart_transfer.protocol.connection import Connection, PeerError
from smart_transfer.protocol.errors import BusyDetails, ProtocolError
from smart_transfer.protocol.flows import Sender
from smart_transfer.protocol.messages import Message, MetadataTarball, Progress
from smart_transfer.transfer.limits import DEFAULT_CONNECT_TIMEOUT

#: Largest frame the client accepts from the server (metadata tarballs of big chains).
DEFAULT_MAX_FRAME_BYTES = 256 * 1024 * 1024
#: Seconds the server may take to answer our close frame.
CLOSE_TIMEOUT = 5.0

M = TypeVar("M", bound=Message | MetadataTarball)


def _peer_error(error: PeerError) -> RemoteError:
    return RemoteError(error.code, error.message, error.details, error.raw_details)


def _handshake_error(url: str, exc: InvalidStatus) -> RemoteError:
    status = exc.response.status_code
    code = code_of_status(status)
    retry = exc.response.headers.get("Retry-After", "")
    details = BusyDetails(retry_after=int(retry)) if code is ErrorCode.BUSY and retry.isdecimal() else None
    return RemoteError(code, f"server refused the session at {redact(url)} (HTTP {status})", details)


class ClientSession:
    """One pull or push session."""

    def __init__(self, socket: ClientConnection, flow: str, answer_timeout: float, max_frame_bytes: int) -> None:
        self.socket = socket
        self.connection = Connection(
            flow, Sender.CLIENT, max_text_bytes=max_frame_bytes, max_binary_bytes=max_frame_bytes
        )
        self.answer_timeout = answer_timeout
        self.lock = asyncio.Lock()

    @classmethod
    async def open(
        cls,
        ws_url: str,
        flow: str,
        token: str | None = None,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        answer_timeout: float = DEFAULT_ANSWER_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> Self:
        """Connect and open a session of ``flow`` with the subprotocol, bounded by ``connect_timeout`` plus
        ``answer_timeout``: the handshake's answer is the server's first, and a busy server that accepted
        the connection may take a while to give it (failing after the connect timeout alone turned a slow
        server under load into an unreachable one)."""
        headers = authorization(token)
        try:
            socket = await connect(
                ws_url,
                subprotocols=[Subprotocol(SUBPROTOCOL)],
                additional_headers=headers,
                max_size=max_frame_bytes,
                open_timeout=connect_timeout + answer_timeout,
                close_timeout=CLOSE_TIMEOUT,
                ping_interval=20,
                ping_timeout=60,
                compression=None,
                proxy=None,  # direct, as the object transfers (no proxy from the environment; docs: pull-push)
            )
        except InvalidStatus as exc:
            raise _handshake_error(ws_url, exc) from None
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
            raise LocalError(ErrorCode.UNREACHABLE, f"cannot reach {redact(ws_url)}: {exc}") from None
        return cls(socket, flow, answer_timeout, max_frame_bytes)

    async def send(self, message: Message | MetadataTarball) -> None:
        """Send ``message`` (the caller holds the lock when a keep-alive may run)."""
        try:
            frame = self.connection.send(message)
        except ProtocolError as exc:
            raise from_protocol(exc, remote=False, context="client bug: ") from None
        try:
            await self.socket.send(frame)
        except ConnectionClosed:
            # the server may have said why before closing (e.g. Unauthorized right after the
            # handshake): its Error message is still queued, so read it
            raise await self._why_closed() from None

    async def expect(self, *types: type[M]) -> M:
        """The server's next message, one of ``types`` (its keep-alives are absorbed on the way)."""
        self.connection.expect(*types)
        while True:
            try:
                async with asyncio.timeout(self.answer_timeout):
                    frame = await self.socket.recv()
            except TimeoutError:
                raise LocalError(
                    ErrorCode.TIMEOUT, f"no answer from the server for {self.answer_timeout:.0f} s"
                ) from None
            except ConnectionClosed:
                raise await self._why_closed() from None
            message = self._receive(frame)
            if message is not None:
                return message  # type: ignore[return-value]  # the core returned one of ``types``

    def _receive(self, frame: str | bytes) -> Message | MetadataTarball | None:
        try:
            return self.connection.receive(frame)
        except PeerError as exc:
            raise _peer_error(exc) from None
        except ProtocolError as exc:
            raise from_protocol(exc, remote=False, context="the server broke the protocol: ") from None

    async def keep_alive(self, objects_done: int, bytes_done: int) -> None:
        """A Progress message, when the table allows one now (keep-alives never break the order)."""
        async with self.lock:
            if self.connection.may_send(Progress):
                await self.send(Progress(objects_done=objects_done, bytes_done=bytes_done))

    async def request(self, message: Message | MetadataTarball, *types: type[M]) -> M:
        """Send ``message`` and wait for its answer, holding the session lock."""
        async with self.lock:
            await self.send(message)
            return await self.expect(*types)

    async def _why_closed(self) -> SmartTransferError:
        try:
            while True:  # an Error sent just before the close frame is still in the queue
                async with asyncio.timeout(CLOSE_TIMEOUT):
                    frame = await self.socket.recv()
                self._receive(frame)
        except SmartTransferError as exc:
            return exc
        except (ConnectionClosed, TimeoutError):
            pass
        error = self.connection.peer_closed(self.socket.close_code, self.socket.close_reason)
        if error is None:
            return LocalError(ErrorCode.INTERNAL, "the server closed a finished session")
        return _peer_error(error)

    async def fail(self, error: SmartTransferError) -> None:
        """Tell the server why this side gives up (an Error, then the close frame)."""
        frame, close = self.connection.fail(ProtocolError(error.code, error.message))
        with contextlib.suppress(ConnectionClosed):
            if frame is not None:
                await self.socket.send(frame)
            await self.socket.close(close.code, close.reason)

    async def close(self) -> None:
        """End the session with a normal close (nothing when it has ended already)."""
        close = self.connection.close_frame()
        await self.socket.close(close.code, close.reason)
