"""Frames <-> messages: a JSON text frame is the message its ``type`` tag names, a binary frame is
the metadata tarball. Anything malformed becomes a ProtocolError with code BadMessage. The messages
it knows are those of the transition tables (``flows.MESSAGES``), so a new one is added once."""

from __future__ import annotations

from typing import Any, overload

import msgspec

from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import ProtocolError
from smart_transfer.protocol.flows import MESSAGES
from smart_transfer.protocol.messages import Message, MetadataTarball, SessionMessage

#: Largest JSON text frame accepted (a page of 1000 object files is ~250 KiB).
MAX_TEXT_FRAME_BYTES = 4 * 1024 * 1024


def _tagged_union(models: list[type[Message]]) -> Any:
    """The type that reads any of ``models``, chosen by the ``type`` tag."""
    union: Any = models[0]
    for model in models[1:]:
        union = union | model
    return union


#: The JSON messages: every message of the tables but the binary one.
JSON_MESSAGES = [kind for kind in MESSAGES if issubclass(kind, Message)]
AnyMessage = _tagged_union(JSON_MESSAGES)
_DECODER = msgspec.json.Decoder(AnyMessage)
_ENCODER = msgspec.json.Encoder()


@overload
def encode(message: Message) -> str: ...
@overload
def encode(message: MetadataTarball) -> bytes: ...
@overload
def encode(message: SessionMessage) -> str | bytes: ...
def encode(message: SessionMessage) -> str | bytes:
    """The frame of ``message``: JSON text, or the tarball's bytes as they are."""
    if isinstance(message, MetadataTarball):
        return message.data
    return _ENCODER.encode(message).decode()


def decode(frame: str | bytes) -> SessionMessage:
    """The message of one frame: a binary frame is the tarball (checked where it is opened); a text
    frame is parsed and validated strictly (no silent type coercion, no unknown fields). Size limits
    are the Connection's."""
    if isinstance(frame, bytes):
        return MetadataTarball(frame)
    try:
        message: Message = _DECODER.decode(frame)
    except RecursionError:  # JSON nested thousands deep (``Error.details`` may hold any JSON)
        raise ProtocolError(ErrorCode.BAD_MESSAGE, "message is nested too deeply") from None
    except msgspec.DecodeError as exc:
        if not isinstance(exc, msgspec.ValidationError):
            raise ProtocolError(ErrorCode.BAD_MESSAGE, "message is not valid JSON") from None
        raise ProtocolError(ErrorCode.BAD_MESSAGE, f"invalid message: {_worded(exc)}") from None
    return message


#: Longest part of a frame an error quotes (msgspec quotes a bad value whole; a frame may be megabytes).
MAX_QUOTED = 200


def _worded(exc: msgspec.ValidationError) -> str:
    """``where: what`` of a validation failure (msgspec says ``what - at `$.where```), short."""
    what, _, where = str(exc).rpartition(" - at `$")  # the last: a quoted bad value may hold the text
    if not what:
        what, where = where, ""
    where = where.strip(".`") or "message"
    return f"{_short(where)}: {_short(what)}"


def _short(text: str) -> str:
    """``text`` with control characters escaped (it goes into error lines and Error messages), cut short."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[: MAX_QUOTED + 1])
    return shown if len(text) <= MAX_QUOTED and len(shown) <= MAX_QUOTED else f"{shown[:MAX_QUOTED]}..."
