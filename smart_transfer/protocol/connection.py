"""The sans-I/O core of a session (after websockets' ``protocol.py``): frames in, typed messages out.

A ``Connection`` is one pull or push session seen from one side. It owns everything both sides must
agree on: frame size limits, decoding, the flow's transition table, the ``Error`` message, and the
close code and reason, both ways. Drivers (the server's WebSocket loop, the client) do the I/O only:

- ``expect(*types)`` says what the driver waits for; it must be exactly what the table lets the peer
  send next (so a driver cannot drift from the table), and ``receive(frame)`` returns the message
  once one of those arrives, absorbing keep-alives (``Progress``) wherever the table allows them;
- ``send(message)`` returns the frame to write, after checking the table allows it;
- ``fail(error)`` returns the ``Error`` frame (if the session is still open) and the close frame;
- ``peer_closed(code, reason)`` turns a close without an ``Error`` into the error it stands for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from msgspec import Struct

from smart_transfer.protocol import SUBPROTOCOL, codec
from smart_transfer.protocol.codes import SERVER_FAULTS, ErrorCode
from smart_transfer.protocol.errors import (
    Details,
    MessageTooLargeDetails,
    ProtocolError,
    UnexpectedMessageDetails,
    parse_details,
)
from smart_transfer.protocol.flows import FLOWS, Phase, Sender
from smart_transfer.protocol.messages import MAX_ERROR_TEXT, Error, MessageType, SessionMessage, name_of

#: Close codes (RFC 6455): done; the server is going away (shutting down); the peer broke the
#: protocol or a rule; a frame too big; the server failed; busy, try again later.
CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_POLICY_VIOLATION = 1008
CLOSE_MESSAGE_TOO_BIG = 1009
CLOSE_INTERNAL_ERROR = 1011
CLOSE_TRY_AGAIN_LATER = 1013
#: RFC 6455 caps a close reason at 123 bytes; the reason is the error code, which always fits.
MAX_CLOSE_REASON_BYTES = 123
#: Largest JSON text frame accepted by default (a page of 1000 object files is ~250 KiB).
DEFAULT_MAX_TEXT_BYTES = codec.MAX_TEXT_FRAME_BYTES
#: Largest binary frame (metadata tarball) accepted by default.
DEFAULT_MAX_BINARY_BYTES = 64 * 1024 * 1024

M = TypeVar("M", bound=SessionMessage)


class CloseFrame(Struct, frozen=True):
    """The close frame a driver sends: code and reason."""

    code: int
    reason: str = ""


class PeerError(Exception):
    """The peer ended the session: with an ``Error`` message, or by closing without finishing."""

    def __init__(self, code: ErrorCode, message: str, details: Details | None, raw_details: dict[str, Any]) -> None:
        self.code = code
        self.message = message
        self.details = details
        self.raw_details = raw_details
        super().__init__(f"{code.value}: {message}")


def negotiate_subprotocol(offered: Sequence[str]) -> str:
    """The subprotocol to accept from the client's offer; UnsupportedProtocol when it is missing."""
    if SUBPROTOCOL not in offered:
        raise ProtocolError(ErrorCode.UNSUPPORTED_PROTOCOL, f"offer the WebSocket subprotocol {SUBPROTOCOL}")
    return SUBPROTOCOL


def close_code_of(code: ErrorCode) -> int:
    """The close code that ends a session failed with ``code``: whose fault it was."""
    if code is ErrorCode.BUSY:
        return CLOSE_TRY_AGAIN_LATER
    if code is ErrorCode.SHUTTING_DOWN:
        return CLOSE_GOING_AWAY
    if code is ErrorCode.MESSAGE_TOO_LARGE:
        return CLOSE_MESSAGE_TOO_BIG
    return CLOSE_INTERNAL_ERROR if code in SERVER_FAULTS else CLOSE_POLICY_VIOLATION


class Connection:
    """One session of ``flow`` as seen by ``side``."""

    def __init__(
        self,
        flow: str,
        side: Sender,
        *,
        max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES,
        max_binary_bytes: int = DEFAULT_MAX_BINARY_BYTES,
    ) -> None:
        self.flow = flow
        self.side = side
        self.peer = Sender.SERVER if side is Sender.CLIENT else Sender.CLIENT
        self.table = FLOWS[flow]
        self.phase = Phase.AWAIT_REQUEST
        self.max_text_bytes = max_text_bytes
        self.max_binary_bytes = max_binary_bytes
        #: The last keep-alive the peer sent (its progress), if any.
        self.peer_progress: SessionMessage | None = None
        self._expected: frozenset[type[Any]] = frozenset()

    @property
    def finished(self) -> bool:
        """Whether the session has ended, done or failed."""
        return self.phase in (Phase.DONE, Phase.FAILED)

    def allowed(self, sender: Sender) -> list[str]:
        """The names of the messages ``sender`` may send in the current phase."""
        return sorted(name_of(kind) for kind in self._allowed(sender))

    def may_send(self, kind: MessageType) -> bool:
        """Whether this side may send a ``kind`` now (a driver's keep-alive asks before it goes out)."""
        return (self.phase, self.side, kind) in self.table

    def _allowed(self, sender: Sender) -> set[MessageType]:
        return {kind for (phase, who, kind) in self.table if phase is self.phase and who is sender}

    def _absorbable(self, kind: MessageType) -> bool:
        """A message that keeps the phase as it is (a keep-alive) may come at any time it is allowed."""
        return self.table.get((self.phase, self.peer, kind)) is self.phase

    # -- receiving ---------------------------------------------------------------------------------

    def expect(self, *types: type[M]) -> None:
        """Declare what the driver waits for next: exactly the messages the table lets the peer send
        now (keep-alives aside). A mismatch is a bug in the driver, raised as ValueError."""
        wanted: frozenset[type[Any]] = frozenset(types)
        allowed = {kind for kind in self._allowed(self.peer) if not self._absorbable(kind) or kind in wanted}
        if wanted != allowed:
            raise ValueError(
                f"{self.flow}/{self.side.value}: in phase {self.phase.value} the {self.peer.value} may send "
                f"{sorted(map(name_of, allowed))}, not {sorted(map(name_of, wanted))}"
            )
        self._expected = wanted

    def receive(self, frame: str | bytes) -> SessionMessage | None:
        """One frame from the peer: the expected message, or None for an absorbed keep-alive.
        Raises PeerError when the peer sent ``Error``, ProtocolError when the frame breaks a rule."""
        self._check_size(frame)
        message = codec.decode(frame)
        if isinstance(message, Error):
            self.phase = Phase.FAILED
            details = message.details if isinstance(message.details, dict) else {}
            raise PeerError(message.code, message.message, parse_details(message.code, details), details)
        kind = type(message)
        self._advance(self.peer, kind)
        if kind in self._expected:
            self._expected = frozenset()
            return message
        if self._absorbable(kind):
            self.peer_progress = message
            return None
        raise self._unexpected(self.peer, kind)

    def _check_size(self, frame: str | bytes) -> None:
        """Each kind of frame has its own limit (JSON pages are small; a tarball may be large)."""
        if isinstance(frame, bytes) and len(frame) > self.max_binary_bytes:
            raise ProtocolError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"binary frame of {len(frame)} bytes exceeds {self.max_binary_bytes}",
                MessageTooLargeDetails(limit=self.max_binary_bytes),
            )
        if isinstance(frame, str) and len(frame) > self.max_text_bytes:
            raise ProtocolError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"text frame of {len(frame)} characters exceeds {self.max_text_bytes}",
                MessageTooLargeDetails(limit=self.max_text_bytes),
            )

    def peer_closed(self, code: int | None, reason: str | None) -> PeerError | None:
        """What a close frame from the peer means: None after a finished session, else the error the
        reason names (servers put the error code there), or one saying the session was cut short."""
        if self.phase is Phase.DONE or (self.phase is Phase.FAILED and code == CLOSE_NORMAL):
            return None
        self.phase = Phase.FAILED
        text = reason or "no reason given"
        try:
            error_code = ErrorCode(text)
        except ValueError:
            error_code = ErrorCode.UNREACHABLE if code in (None, 1001, 1006) else ErrorCode.INTERNAL
        return PeerError(error_code, f"the {self.peer.value} closed the session (code {code}: {text})", None, {})

    # -- sending -----------------------------------------------------------------------------------

    def send(self, message: SessionMessage) -> str | bytes:
        """The frame for ``message``; raises ProtocolError(Internal) if the table does not allow it."""
        kind = type(message)
        if not self.may_send(kind):
            raise ProtocolError(
                ErrorCode.INTERNAL,
                f"{self.flow}: {self.side.value} may not send {name_of(kind)} in phase {self.phase.value}",
            )
        self._advance(self.side, kind)
        return codec.encode(message)

    def fail(self, error: ProtocolError) -> tuple[str | None, CloseFrame]:
        """End the session because of ``error``: the ``Error`` frame to send first (None when the
        session is already over) and the close frame."""
        if self.phase is Phase.DONE:
            return None, CloseFrame(CLOSE_NORMAL)
        already_failed = self.phase is Phase.FAILED
        self.phase = Phase.FAILED
        close = CloseFrame(close_code_of(error.code), error.code.value.encode()[:MAX_CLOSE_REASON_BYTES].decode())
        if already_failed:
            return None, close
        frame = codec.encode(
            Error(code=error.code, message=error.message[:MAX_ERROR_TEXT], details=error.details_dict())
        )
        return frame, close

    def close_frame(self) -> CloseFrame:
        """The close frame of a session that ended normally or by the peer's ``Error``."""
        return CloseFrame(CLOSE_NORMAL)

    # -- the table ---------------------------------------------------------------------------------

    def _advance(self, sender: Sender, kind: MessageType) -> None:
        next_phase = self.table.get((self.phase, sender, kind))
        if next_phase is None:
            raise self._unexpected(sender, kind)
        self.phase = next_phase

    def _unexpected(self, sender: Sender, kind: MessageType) -> ProtocolError:
        allowed, name = self.allowed(sender), name_of(kind)
        return ProtocolError(
            ErrorCode.UNEXPECTED_MESSAGE,
            f"{self.flow}: {sender.value} sent {name} in phase {self.phase.value}; allowed: "
            f"{', '.join(allowed) or 'nothing'}",
            UnexpectedMessageDetails(flow=self.flow, phase=self.phase.value, message=name, allowed=allowed),
        )
