"""The server's WebSocket driver: I/O around one protocol ``Connection`` (which owns order, limits,
errors and close codes). It waits for frames within the idle timeout and writes what the core says."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TypeVar

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketDisconnected, WebSocketState

from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.connection import DEFAULT_MAX_TEXT_BYTES, CloseFrame, Connection, negotiate_subprotocol
from smart_transfer.protocol.errors import ProtocolError
from smart_transfer.protocol.flows import Sender
from smart_transfer.protocol.messages import Message, MetadataTarball
from smart_transfer.server.auth import Grant

M = TypeVar("M", bound=Message | MetadataTarball)
_GONE = (WebSocketDisconnect, WebSocketDisconnected, RuntimeError)


class ClientGone(Exception):
    """The client closed the connection (``code``: its close code, when it sent one)."""

    def __init__(self, code: int | None = None) -> None:
        self.code = code
        super().__init__(f"the client closed the connection (code {code})")


class ServerSession:
    """One pull or push session on one WebSocket."""

    def __init__(self, websocket: WebSocket, flow: str, idle_timeout: float, max_message_bytes: int) -> None:
        self.websocket = websocket
        self.connection = Connection(
            flow,
            Sender.SERVER,
            max_text_bytes=min(DEFAULT_MAX_TEXT_BYTES, max_message_bytes),
            max_binary_bytes=max_message_bytes,
        )
        self.idle_timeout = idle_timeout
        #: Whom the session acts for (the token's subject, or the anonymous client's address).
        self.subject = "-"
        #: The token's grant (None on a server without tokens): a following session ends when it expires.
        self.grant: Grant | None = None
        #: Bytes of the frames received and sent (all metadata: object bytes never pass here).
        self.bytes_received = 0
        self.bytes_sent = 0
        #: Whether the session waited for the head to move (a follower): its duration is no work's.
        self.followed = False

    async def accept(self) -> None:
        """Complete the handshake; a client that did not offer the subprotocol gets a typed error."""
        offered = self.websocket.scope.get("subprotocols", [])
        try:
            subprotocol: str | None = negotiate_subprotocol(offered)
        except ProtocolError:
            subprotocol = None
        await self.websocket.accept(subprotocol=subprotocol)
        if subprotocol is None:
            negotiate_subprotocol(offered)

    async def expect(self, *types: type[M]) -> M:
        """The client's next message, one of ``types`` (keep-alives are absorbed on the way)."""
        self.connection.expect(*types)
        while True:
            try:
                async with asyncio.timeout(self.idle_timeout):
                    frame = await self.websocket.receive()
            except TimeoutError:
                raise ProtocolError(ErrorCode.TIMEOUT, f"no message for {self.idle_timeout:.0f} s") from None
            if frame["type"] == "websocket.disconnect":
                self.connection.peer_closed(frame.get("code"), frame.get("reason"))
                raise ClientGone(frame.get("code"))
            data = frame.get("bytes")
            payload = data if data is not None else frame.get("text") or ""
            self.bytes_received += len(payload)
            message = self.connection.receive(payload)
            if message is not None:
                return message  # type: ignore[return-value]  # the core returned one of ``types``

    async def send(self, message: Message | MetadataTarball) -> None:
        frame = self.connection.send(message)
        self.bytes_sent += len(frame)
        if isinstance(frame, bytes):
            await self.websocket.send_bytes(frame)
        else:
            await self.websocket.send_text(frame)

    async def fail(self, error: ProtocolError) -> None:
        """Send the core's Error frame (if the session is still open), then its close frame."""
        if self.websocket.client_state is not WebSocketState.CONNECTED:
            return
        frame, close = self.connection.fail(error)
        if frame is not None:
            try:
                await self.websocket.send_text(frame)
            except _GONE:
                return
        await self.close(close)

    async def close(self, close: CloseFrame | None = None) -> None:
        """Close unless the peer already did (clients close right after their last message)."""
        if self.websocket.application_state is WebSocketState.DISCONNECTED:
            return
        close = close or self.connection.close_frame()
        with contextlib.suppress(*_GONE):
            await self.websocket.close(close.code, close.reason)
