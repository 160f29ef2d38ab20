"""Text frames <-> messages. Anything malformed becomes a ProtocolError with code BadMessage."""

from __future__ import annotations

import orjson
from pydantic import TypeAdapter, ValidationError

from smart_transfer.protocol.errors import ErrorCode, ProtocolError
from smart_transfer.protocol.messages import AnyMessage, Message

#: Largest JSON text frame accepted (a page of 1000 object files is ~250 KiB).
MAX_TEXT_FRAME_BYTES = 4 * 1024 * 1024

_ADAPTER: TypeAdapter[AnyMessage] = TypeAdapter(AnyMessage)


def encode(message: Message) -> str:
    """The JSON text of ``message``."""
    return orjson.dumps(message.model_dump(mode="json")).decode()


def decode(text: str | bytes) -> AnyMessage:
    """Parse and validate one text frame (strict: no silent type coercion, no unknown fields). Size
    limits are the Connection's."""
    try:
        return _ADAPTER.validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first.get("type") == "json_invalid":
            raise ProtocolError(ErrorCode.BAD_MESSAGE, "message is not valid JSON") from None
        where = ".".join(str(p) for p in first.get("loc", ())) or "message"
        raise ProtocolError(ErrorCode.BAD_MESSAGE, f"invalid message: {where}: {first.get('msg', 'invalid')}") from None
