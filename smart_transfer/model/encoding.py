"""The one canonical serializer for blocks: JSON via orjson, keys sorted, no floats, no NaN."""

from __future__ import annotations

from typing import Any

import orjson

from smart_transfer.model.errors import InvalidBlock

_OPTIONS = orjson.OPT_SORT_KEYS
MAX_SAFE_INTEGER = 2**63 - 1


def _check(value: Any, path: str) -> None:
    """Refuse what would make the bytes ambiguous: floats (rounding), non-string keys, odd types."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int):
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise InvalidBlock(f"integer out of range at {path}")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidBlock(f"non-text key at {path}")
            _check(item, f"{path}.{key}")
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check(item, f"{path}[{i}]")
        return
    if isinstance(value, float):
        raise InvalidBlock(f"floats are not allowed in blocks (at {path})")
    raise InvalidBlock(f"unsupported value of type {type(value).__name__} at {path}")


def canonical_bytes(value: dict[str, Any]) -> bytes:
    """Encode a JSON object canonically: the same value always gives the same bytes."""
    _check(value, "$")
    return orjson.dumps(value, option=_OPTIONS)


def load_object(data: bytes) -> dict[str, Any]:
    """Decode JSON bytes into an object without walking its values: for models whose typed readers
    check every value themselves (blocks), so that decoding 100,000 of them stays cheap."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InvalidBlock(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidBlock("a block must be a JSON object")
    return value


def decode_object(data: bytes) -> dict[str, Any]:
    """Decode canonical bytes back into a JSON object, refusing anything that is not one."""
    value = load_object(data)
    _check(value, "$")
    return value


def is_canonical(value: dict[str, Any], data: bytes) -> bool:
    """Whether ``data`` is the canonical encoding of ``value``, a JSON object decoded from it whose
    values a typed reader checked (so none is a float or out of range)."""
    return orjson.dumps(value, option=_OPTIONS) == data
