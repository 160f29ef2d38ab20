"""The client's WebSocket driver: the same Conversation the server uses, over ``websockets``."""

from __future__ import annotations

import asyncio
from typing import Self

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.typing import Subprotocol

from smart_transfer.protocol import SUBPROTOCOL, codec
from smart_transfer.protocol.errors import ErrorCode, ProtocolError
from smart_transfer.protocol.flows import TARBALL, Conversation, Sender
from smart_transfer.protocol.messages import AnyMessage, Error, Message, MetadataTarball

#: Largest frame the client accepts from the server (metadata tarballs of big chains).
DEFAULT_MAX_FRAME_BYTES = 256 * 1024 * 1024
#: Seconds to wait for any one answer from the server (verification of big pushes can take a while).
DEFAULT_ANSWER_TIMEOUT = 300.0
#: Seconds to wait for the connection to open.
DEFAULT_CONNECT_TIMEOUT = 15.0


class RemoteError(ProtocolError):
    """The server ended the session with a typed Error, or could not be reached."""

    def __str__(self) -> str:
        return f"{self.message} ({self.code.value})"


class ClientSession:
    """One pull or push session. Sends and receives are serialized by a lock so that background
    tasks (progress, URL refresh) can share the session with the main flow."""

    def __init__(self, connection: ClientConnection, flow: str, answer_timeout: float) -> None:
        self.connection = connection
        self.conversation = Conversation(flow)
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
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            connection = await connect(
                ws_url,
                subprotocols=[Subprotocol(SUBPROTOCOL)],
                additional_headers=headers,
                max_size=max_frame_bytes,
                open_timeout=connect_timeout,
                ping_interval=20,
                ping_timeout=60,
                compression=None,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            code = {401: ErrorCode.UNAUTHORIZED, 403: ErrorCode.FORBIDDEN, 429: ErrorCode.BUSY}.get(
                status, ErrorCode.INTERNAL
            )
            raise RemoteError(code, f"server refused the session at {ws_url} (HTTP {status})") from None
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
            raise RemoteError(ErrorCode.UNREACHABLE, f"cannot reach {ws_url}: {exc}") from None
        return cls(connection, flow, answer_timeout)

    async def send(self, message: Message) -> None:
        self.conversation.advance(Sender.CLIENT, getattr(message, "type", ""))
        await self._send(codec.encode(message))

    async def send_tarball(self, data: bytes) -> None:
        self.conversation.advance(Sender.CLIENT, TARBALL)
        await self._send(data)

    async def _send(self, frame: str | bytes) -> None:
        try:
            await self.connection.send(frame)
        except ConnectionClosed:
            # the server may have said why before closing (e.g. Unauthorized right after the
            # handshake): its Error message is still queued, so read it
            await self.receive()
            raise await self._closed_error() from None

    async def receive(self) -> AnyMessage | MetadataTarball:
        try:
            frame = await asyncio.wait_for(self.connection.recv(), self.answer_timeout)
        except TimeoutError:
            raise RemoteError(ErrorCode.TIMEOUT, f"no answer from the server for {self.answer_timeout:.0f} s") from None
        except ConnectionClosed:
            raise await self._closed_error() from None
        message: AnyMessage | MetadataTarball
        if isinstance(frame, bytes):
            message = MetadataTarball(frame)
        else:
            try:
                message = codec.decode(frame, max_bytes=len(frame) + 1)
            except ProtocolError as exc:
                raise RemoteError(exc.code, f"the server sent an invalid message: {exc.message}") from None
        if isinstance(message, Error):
            self.conversation.advance(Sender.SERVER, "Error")
            raise RemoteError(message.code, message.message, message.details)
        try:
            self.conversation.advance(Sender.SERVER, message.type)
        except ProtocolError as exc:
            raise RemoteError(exc.code, f"the server broke the protocol: {exc.message}") from None
        return message

    async def request(self, message: Message) -> AnyMessage | MetadataTarball:
        """Send ``message`` and wait for the answer, holding the session lock."""
        async with self.lock:
            await self.send(message)
            return await self.receive()

    async def _closed_error(self) -> RemoteError:
        close = self.connection.close_code
        reason = self.connection.close_reason or "no reason given"
        try:
            code = ErrorCode(reason)  # the server puts the error code in the close reason
        except ValueError:
            code = ErrorCode.INTERNAL
        return RemoteError(code, f"the server closed the session (code {close}: {reason})")

    async def close(self) -> None:
        await self.connection.close()
