"""Strict readers for fields of decoded JSON objects: wrong type, missing or unknown -> InvalidBlock."""

from __future__ import annotations

from typing import Any

from smart_transfer.model.encoding import MAX_SAFE_INTEGER
from smart_transfer.model.errors import InvalidBlock, InvalidMultihash
from smart_transfer.model.multihash import Multihash


def require_keys(obj: dict[str, Any], where: str, required: set[str], optional: frozenset[str] = frozenset()) -> None:
    """Refuse missing required keys and keys the model does not know (so encoding stays one-to-one)."""
    keys = obj.keys()
    if keys == required or (keys >= required and keys - required <= optional):  # the usual cases, in C
        return
    missing = required - keys
    if missing:
        raise InvalidBlock(f"{where}: missing field(s) {', '.join(sorted(missing))}")
    unknown = keys - required - optional
    if unknown:
        raise InvalidBlock(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")


def get_int(obj: dict[str, Any], key: str, where: str, *, minimum: int = 0) -> int:
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "floats are not allowed in blocks" if isinstance(value, float) else "expected an integer"
        raise InvalidBlock(f"{where}.{key}: {kind}")
    if value > MAX_SAFE_INTEGER:
        raise InvalidBlock(f"{where}.{key}: integer out of range")
    if value < minimum:
        raise InvalidBlock(f"{where}.{key}: must be >= {minimum}, got {value}")
    return value


def get_str(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj[key]
    if not isinstance(value, str):
        raise InvalidBlock(f"{where}.{key}: expected text")
    return value


def get_hash(obj: dict[str, Any], key: str, where: str) -> Multihash:
    try:
        return Multihash.parse(get_str(obj, key, where))
    except InvalidMultihash as exc:
        raise InvalidBlock(f"{where}.{key}: {exc}") from None


def get_object(obj: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = obj[key]
    if not isinstance(value, dict):
        raise InvalidBlock(f"{where}.{key}: expected an object")
    return value
