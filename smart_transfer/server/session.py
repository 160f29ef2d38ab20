"""The server's WebSocket driver: frames in and out through one protocol Conversation.

It turns frames into messages (codec), checks each against the flow's transition table, enforces
the idle timeout and frame limits, and ends every failed session with a typed ``Error`` message
followed by a close frame whose reason fits the 123-byte limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketDisconnected, WebSocketState

from smart_transfer.protocol import SUBPROTOCOL, codec
from smart_transfer.protocol.errors import ErrorCode, ProtocolError
from smart_transfer.protocol.flows import TARBALL, Conversation, Sender
from smart_transfer.protocol.messages import AnyMessage, Error, Message, MetadataTarball

log = logging.getLogger("smart_transfer.server")

#: Close codes: 1000 done, 1008 the client broke the protocol, 1011 the server failed, 1013 busy.
CLOSE_OK = 1000
CLOSE_POLICY = 1008
CLOSE_SERVER_ERROR = 1011
CLOSE_TRY_AGAIN = 1013
MAX_CLOSE_REASON_BYTES = 123
_SERVER_FAULTS = {ErrorCode.INTERNAL, ErrorCode.STORAGE_UNAVAILABLE}


class ClientGone(Exception):
    """The client closed the connection or stopped answering."""


class ServerSession:
    """One pull or push session on one WebSocket."""

    def __init__(self, websocket: WebSocket, flow: str, idle_timeout: float, max_binary_bytes: int) -> None:
        self.websocket = websocket
        self.conversation = Conversation(flow)
        self.idle_timeout = idle_timeout
        self.max_binary_bytes = max_binary_bytes

    async def accept(self) -> None:
        offered = self.websocket.scope.get("subprotocols", [])
        await self.websocket.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None)
        if SUBPROTOCOL not in offered:
            raise ProtocolError(ErrorCode.UNSUPPORTED_PROTOCOL, f"offer the WebSocket subprotocol {SUBPROTOCOL}")

    async def receive(self) -> AnyMessage | MetadataTarball:
        """The client's next message, checked against the flow."""
        try:
            frame = await asyncio.wait_for(self.websocket.receive(), self.idle_timeout)
        except TimeoutError:
            raise ProtocolError(ErrorCode.TIMEOUT, f"no message for {self.idle_timeout:.0f} s") from None
        if frame["type"] == "websocket.disconnect":
            raise ClientGone()
        message: AnyMessage | MetadataTarball
        if frame.get("bytes") is not None:
            data: bytes = frame["bytes"]
            if len(data) > self.max_binary_bytes:
                raise ProtocolError(ErrorCode.MESSAGE_TOO_LARGE, f"binary frame exceeds {self.max_binary_bytes} bytes")
            message = MetadataTarball(data)
        else:
            message = codec.decode(frame.get("text") or "")
        self.conversation.advance(Sender.CLIENT, message.type)
        if isinstance(message, Error):
            raise ClientGone()
        return message

    async def receive_expected(self, *types: type[Message]) -> AnyMessage:
        """A JSON message that must be one of ``types`` (the table already checked the order)."""
        message = await self.receive()
        if isinstance(message, MetadataTarball) or not isinstance(message, types):
            raise ProtocolError(ErrorCode.UNEXPECTED_MESSAGE, f"unexpected {message.type}")
        return message

    async def send(self, message: Message) -> None:
        self.conversation.advance(Sender.SERVER, getattr(message, "type", type(message).__name__))
        await self.websocket.send_text(codec.encode(message))

    async def send_tarball(self, data: bytes) -> None:
        self.conversation.advance(Sender.SERVER, TARBALL)
        await self.websocket.send_bytes(data)

    async def close(self, code: int = CLOSE_OK, reason: str = "") -> None:
        """Close unless the peer already did (clients close right after their last message)."""
        if self.websocket.application_state is WebSocketState.DISCONNECTED:
            return
        with contextlib.suppress(WebSocketDisconnect, WebSocketDisconnected, RuntimeError):
            await self.websocket.close(code, reason)

    async def fail(self, error: ProtocolError) -> None:
        """Send the typed error, then close with a code that says whose fault it was."""
        if self.websocket.application_state is WebSocketState.CONNECTING:
            await self.websocket.accept()
        if self.websocket.client_state is not WebSocketState.CONNECTED:
            return
        code = CLOSE_SERVER_ERROR if error.code in _SERVER_FAULTS else CLOSE_POLICY
        if error.code is ErrorCode.BUSY:
            code = CLOSE_TRY_AGAIN
        if self.conversation.finished:
            await self.close()
            return
        self.conversation.advance(Sender.SERVER, "Error")
        try:
            await self.websocket.send_text(
                codec.encode(Error(code=error.code, message=error.message[:2000], details=error.details))
            )
        except (WebSocketDisconnect, WebSocketDisconnected, RuntimeError):
            return
        await self.close(code, error.code.value.encode()[:MAX_CLOSE_REASON_BYTES].decode())
