"""Versions and block references as users write them, read once for every face: a block's sequence number
or its full hash (``diff``, the web view's block and comparison pages), and a range of sequence numbers or
offsets (``export --blocks``, ``--offsets``). Text that is none of these, or a number beyond the
protocol's Long, is a :class:`~smart_transfer.config.values.BadValue`; whether a well-formed one names a
block of a chain is the repository's question (``repo/compare.py``: ``resolve_version``)."""

from __future__ import annotations

import re

from smart_transfer.config.values import LONG_MAX, BadValue, quoted, whole_number
from smart_transfer.model.errors import InvalidMultihash
from smart_transfer.model.multihash import Multihash

#: An inclusive range; either end None for open.
Range = tuple[int | None, int | None]
_NUMBER = re.compile(r"[+-]?[0-9]+")
_RANGE = re.compile(r"([0-9]*)-([0-9]*)|([0-9]+)")


def block_ref(text: str, what: str = "a version") -> int | Multihash:
    """A sequence number (0 to LONG_MAX) or a block's full hash; BadValue otherwise."""
    stripped = text.strip()
    if _NUMBER.fullmatch(stripped):
        return whole_number(stripped, what, 0, LONG_MAX)
    try:
        return Multihash.parse(stripped)
    except InvalidMultihash:
        wanted = f"a sequence number from 0 to {LONG_MAX} or a block hash"
        raise BadValue(f"{what} is {wanted}, not {quoted(text)}") from None


def number_range(text: str, what: str = "a range") -> Range:
    """``FIRST-LAST`` (inclusive; either end may be left out) or one number, each from 0 to LONG_MAX;
    BadValue otherwise, or for a range that ends before it starts."""
    match = _RANGE.fullmatch(text.strip())
    if match is None or match.group(0) == "-":
        raise BadValue(f"not {what}: {quoted(text)} (examples: 100-199, 100-, -199, 42)")
    if match.group(3) is not None:
        one = whole_number(match.group(3), what, 0, LONG_MAX)
        return one, one
    first, last = (whole_number(part, what, 0, LONG_MAX) if part else None for part in match.group(1, 2))
    if first is not None and last is not None and first > last:
        raise BadValue(f"range {quoted(text)} ends before it starts")
    return first, last
