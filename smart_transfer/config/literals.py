"""A predicate hint's literal (Delta Sharing's ``jsonPredicateHints`` and SQL ``predicateHints``) as a value
that compares exactly with a column's statistics, or None: "unknown", which keeps every file. Unknown is
the answer whenever an exact comparison is not certain: NaN and infinities, a literal finer than the
column's values (a time below the microsecond, a number a float cannot hold, more digits than a decimal
has), a literal whose text is not of its declared type or that type's range, a type that does not match
the column's. A hint only saves reading files; a file wrongly kept costs a read, a file wrongly dropped
costs a wrong answer, so this module never guesses.

The value returned compares exactly with the statistics' bounds (``repo/footer_stats.py``): a
``Decimal`` for every number column (Python compares a ``Decimal`` exactly with an ``int``, a ``float``
and another ``Decimal``), a ``date``, whole microseconds for a time, the text itself for a string."""

from __future__ import annotations

import datetime as dt
import re
import struct
from decimal import Decimal
from typing import Any

from smart_transfer.config.values import BadValue, moment

#: The literal value types a column of each kind compares with (none named: the text is read as the
#: column's kind; ``number`` is an unquoted SQL number, ``string`` a quoted SQL string, which SQL would
#: cast to the column's type by rules of its own, so it compares with string columns only).
VALUE_TYPES = {
    "int": {"int", "long", "short", "byte", "number"},
    "float": {"float", "double", "int", "long", "short", "byte", "number"},
    "decimal": {"int", "long", "short", "byte", "decimal", "number"},
    "string": {"string"},
    "date": {"date"},
    "timestamp": {"timestamp"},
    "timestamp_ntz": {"timestamp", "timestamp_ntz"},
}
#: The range of each integral value type (a literal outside its type's range is malformed).
INTEGRAL_RANGES = {
    "byte": (-(2**7), 2**7 - 1),
    "short": (-(2**15), 2**15 - 1),
    "int": (-(2**31), 2**31 - 1),
    "long": (-(2**63), 2**63 - 1),
}
#: Most significant digits of a decimal (Spark's and Parquet's widest decimal holds 38).
MAX_DECIMAL_DIGITS = 38
#: Longest literal text read (a longer one is unknown).
MAX_LITERAL_CHARS = 200
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,4})?")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _number(text: str) -> Decimal | None:
    """A number's exact value (ASCII digits; None: not a number, or no finite one)."""
    stripped = text.strip()
    if len(stripped) > MAX_LITERAL_CHARS or not _NUMBER.fullmatch(stripped):
        return None
    return Decimal(stripped)


def _is_double(text: str, value_type: str | None) -> bool:
    """Whether the literal is a binary floating-point one (SQL: an unquoted number with an exponent)."""
    return value_type in ("float", "double") or (value_type in ("number", None) and "e" in text.lower())


def _written_whole(text: str) -> bool:
    """Whether a number is written without a point or an exponent."""
    stripped = text.strip()
    return "." not in stripped and "e" not in stripped.lower()


def _float32_exact(value: Decimal) -> bool:
    try:
        rounded = struct.unpack("f", struct.pack("f", float(value)))[0]
    except OverflowError:
        return False
    return Decimal(rounded) == value


def _exact_in_type(value: Decimal, text: str, value_type: str | None) -> bool:
    """Whether the literal's text is exactly a value of its declared type (no rounding, no range)."""
    if value_type in INTEGRAL_RANGES:
        low, high = INTEGRAL_RANGES[value_type]
        return value == value.to_integral_value() and low <= value <= high and _written_whole(text)
    if value_type == "float":
        return _float32_exact(value)
    if _is_double(text, value_type):
        return Decimal(float(value)) == value
    return _decimal_digits(value) <= MAX_DECIMAL_DIGITS  # a decimal literal


def _decimal_digits(value: Decimal) -> int:
    """The precision a decimal type needs to hold ``value`` exactly (digits before and after the point)."""
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)  # a finite number: the pattern admits no other
    return max(value.adjusted() + 1, 1) + max(-exponent, 0)


def _numeric(kind: str, text: str, value_type: str | None) -> Decimal | None:
    """A literal for an ``int``, ``float`` or ``decimal`` column, or None."""
    value = _number(text)
    if value is None or not _exact_in_type(value, text, value_type):
        return None
    if kind == "float":
        # the statistics do not say whether a float column is 32 or 64 bits wide, and a reader may cast the
        # literal to the column's type: only a literal a float32 holds exactly means the same either way
        return value if _float32_exact(value) else None
    if _is_double(text, value_type):
        return None  # SQL casts the column to a double to compare: a large integer or decimal may round
    return value


def _time(kind: str, text: str) -> int | None:
    try:
        found = moment(text)
    except BadValue:
        return None
    if found.zoned != (kind == "timestamp"):
        return None  # an instant against a local time (or the reverse): no exact comparison
    return found.micros()  # None: finer than the column's microseconds


def hint_literal(kind: str, text: str, value_type: str | None) -> Any:
    """The literal ``text`` (of ``value_type``, as the hint declares it) as a value that compares exactly
    with the bounds of a ``kind`` column (``ColumnStats.kind``), or None: unknown."""
    if kind not in VALUE_TYPES or (value_type is not None and value_type not in VALUE_TYPES[kind]):
        return None
    if len(text) > 64 * 1024 or any("\ud800" <= char <= "\udfff" for char in text):
        return None  # no value of any column: not UTF-8
    if kind in ("int", "float", "decimal"):
        return _numeric(kind, text, value_type)
    if kind == "date":
        stripped = text.strip()
        try:
            return dt.date.fromisoformat(stripped) if _DATE.fullmatch(stripped) else None
        except ValueError:
            return None
    if kind in ("timestamp", "timestamp_ntz"):
        return _time(kind, text)
    return text
