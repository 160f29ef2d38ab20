"""Frames <-> messages: a JSON text frame is the message its ``type`` tag names, a binary frame is
the metadata tarball. Anything malformed becomes a ProtocolError with code BadMessage. The messages
it knows are those of the transition tables (``flows.MESSAGES``), so a new one is added once."""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, overload

import orjson
from pydantic import Field, TypeAdapter, ValidationError

from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import ProtocolError
from smart_transfer.protocol.flows import MESSAGES
from smart_transfer.protocol.messages import Message, MetadataTarball, SessionMessage

#: Largest JSON text frame accepted (a page of 1000 object files is ~250 KiB).
MAX_TEXT_FRAME_BYTES = 4 * 1024 * 1024


def _tagged_union(models: list[type[Message]]) -> Any:
    """The pydantic type that reads any of ``models``, chosen by the ``type`` tag."""
    union: Any = models[0]
    for model in models[1:]:
        union = union | model
    return Annotated[union, Field(discriminator="type")]


#: The JSON messages: every message of the tables but the binary one.
JSON_MESSAGES = [kind for kind in MESSAGES if issubclass(kind, Message)]
AnyMessage = _tagged_union(JSON_MESSAGES)
#: Each JSON message by its ``type`` tag.
_BY_TAG: dict[str, type[Message]] = {kind.model_fields["type"].default: kind for kind in JSON_MESSAGES}


@cache
def _adapter() -> TypeAdapter[Message]:
    """The validator of the whole tagged union, built on first use: it words the errors of frames
    that fail (building it at import cost every command start-up ~25 ms; see ``decode``)."""
    return TypeAdapter(AnyMessage)


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
    return orjson.dumps(message.model_dump(mode="json")).decode()


def _tag(frame: str) -> str:
    """The ``type`` tag of a JSON object frame ("": not one, or no text tag)."""
    try:
        value = orjson.loads(frame)
    except orjson.JSONDecodeError:
        return ""
    tag = value.get("type") if isinstance(value, dict) else None
    return tag if isinstance(tag, str) else ""


def decode(frame: str | bytes) -> SessionMessage:
    """The message of one frame: a binary frame is the tarball (checked where it is opened); a text
    frame is parsed and validated strictly (no silent type coercion, no unknown fields). Size limits
    are the Connection's."""
    if isinstance(frame, bytes):
        return MetadataTarball(frame)
    # the model its tag names validates it (what the union would pick), built only when first used;
    # anything that fails is validated again by the union, so errors read the same whatever the path
    model = _BY_TAG.get(_tag(frame))
    if model is not None:
        try:
            return model.model_validate_json(frame)
        except ValidationError:
            pass
    try:
        return _adapter().validate_json(frame)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first.get("type") == "json_invalid":
            raise ProtocolError(ErrorCode.BAD_MESSAGE, "message is not valid JSON") from None
        where = ".".join(str(p) for p in first.get("loc", ())) or "message"
        raise ProtocolError(ErrorCode.BAD_MESSAGE, f"invalid message: {where}: {first.get('msg', 'invalid')}") from None
