"""Text a user sends, read as a value once: one parser per kind of value, shared by every face (the web
view, REST, Delta Sharing, WebSocket messages, command-line arguments, settings). Whole numbers within
bounds, real numbers, and moments in time. Each refuses what is not its kind, or is out of its bounds,
with :class:`BadValue` (one sentence naming what was wanted), and each face maps that one error to its own
answer: a 400 page, a 400 body, an exit 2. Digits are ASCII only (``int`` and ``float`` would also take
``٣`` or ``1_000``), and no text is converted before its length says it fits: Python refuses to turn
more than 4,300 digits into a number, and a parser here never asks it to.

Block references (sequence numbers or hashes, and ranges of them) are in ``model/versions.py``, hint
literals in ``config/literals.py``; both are built on these."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from fractions import Fraction

#: The protocol's Long, the largest version or sequence number any face takes.
LONG_MAX = 2**63 - 1
#: Most characters of a user's text quoted back in an error.
QUOTED_CHARS = 40
_WHOLE = re.compile(r"[+-]?[0-9]+")
_REAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,4})?")
#: Spaces and tabs around a value are forgiven (as ``int`` forgives them); nothing else is.
_AROUND = " \t\r\n"


class BadValue(ValueError):
    """Text that is not a value of the kind wanted, or a value outside its bounds (the message says which
    values are taken)."""


def quoted(text: str) -> str:
    """A user's text as an error quotes it: at most QUOTED_CHARS characters, and how many in all."""
    if len(text) <= QUOTED_CHARS:
        return repr(text)
    return f"{text[:QUOTED_CHARS]!r}… ({len(text):,} characters)"


def _digits(bound: int) -> int:
    return len(str(abs(bound)))


def whole_number(text: str, what: str, low: int = -LONG_MAX - 1, high: int = LONG_MAX) -> int:
    """``text`` as a whole number from ``low`` to ``high`` (ASCII digits, an optional sign, spaces around
    it); BadValue otherwise. A number with more digits than the bounds have is out of range unread."""
    stripped = text.strip(_AROUND)
    wanted = f"{what} must be a whole number from {low} to {high}"
    if not _WHOLE.fullmatch(stripped):
        raise BadValue(f"{wanted}, not {quoted(text)}")
    significant = stripped.lstrip("+-").lstrip("0")
    if len(significant) > max(_digits(low), _digits(high)) or not low <= int(stripped) <= high:
        raise BadValue(f"{wanted}; {quoted(stripped)} is out of range")
    return int(stripped)


def real_number(text: str, what: str) -> float:
    """``text`` as a finite number (``12``, ``-0.5``, ``1e3``; ASCII, no ``nan`` or ``inf``); BadValue
    otherwise. Bounds are the caller's (a setting's range)."""
    stripped = text.strip(_AROUND)
    value = float(stripped) if _REAL.fullmatch(stripped) else None
    if value is None or value in (float("inf"), float("-inf")):
        raise BadValue(f"{what} must be a finite number (e.g. 2.5), not {quoted(text)}")
    return value


#: A moment as people and the Delta Sharing protocol write one: a date, optionally a time of day to the
#: minute or second and any fraction of it, optionally a zone (``Z``, ``UTC``, ``+05:30``, ``-0800``).
_MOMENT = re.compile(
    r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
    r"(?:[Tt ]([0-9]{1,2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]{1,30}))?)?)?"
    r" ?([Zz]|UTC|[+-][0-9]{2}:?[0-9]{2})?"
)
_NANOS_PER_SECOND = 10**9
_EPOCH_DAY = date(1970, 1, 1).toordinal()


@dataclass(frozen=True)
class Moment:
    """A moment, exactly as written: nanoseconds since 1970-01-01T00:00 (a fraction when the text is
    finer), in UTC when ``zoned`` (the text named a zone), else on a wall clock of no zone."""

    nanos: Fraction
    zoned: bool

    def micros(self) -> int | None:
        """The moment in whole microseconds (None: the text is finer than a microsecond)."""
        micros = self.nanos / 1000
        return int(micros) if micros.denominator == 1 else None

    def millis(self, up: bool = False) -> int:
        """The moment in milliseconds, rounded down (or ``up``): a time of whole milliseconds is at or
        before the moment exactly when it is at or before ``millis()``, at or after it when at or after
        ``millis(up=True)``."""
        whole = self.nanos // 1_000_000
        return int(whole + 1) if up and whole * 1_000_000 != self.nanos else int(whole)


def _zone_nanos(zone: str | None) -> int | None:
    """The zone's offset from UTC in nanoseconds (None: no zone named)."""
    if zone is None:
        return None
    if zone.upper() in ("Z", "UTC"):
        return 0
    hours, minutes = int(zone[1:3]), int(zone[-2:])
    if hours > 18 or minutes >= 60:
        raise ValueError(zone)
    sign = -1 if zone[0] == "-" else 1
    return sign * (hours * 3600 + minutes * 60) * _NANOS_PER_SECOND


def moment(text: str, what: str = "the time", seconds: bool = False) -> Moment:
    """``text`` as an exact moment (``_MOMENT``: e.g. ``2026-01-31T12:00:00Z``, ``2026-01-31 12:00:00.5``,
    ``2026-01-31``; with ``seconds``, only a time to the second or finer, as Delta Sharing writes them);
    BadValue for anything else, or a day, hour, minute or second that does not exist."""
    match = _MOMENT.fullmatch(text.strip(_AROUND))
    try:
        if match is None or (seconds and match[6] is None):
            raise ValueError(text)
        year, month, day, hour, minute, second = (int(part or 0) for part in match.groups()[:6])
        days = date(year, month, day).toordinal() - _EPOCH_DAY
        if hour > 23 or minute > 59 or second > 59:
            raise ValueError(text)
        offset = _zone_nanos(match[8])
    except ValueError:
        raise BadValue(f"{what} must be a date and time such as 2026-01-31T12:00:00Z, not {quoted(text)}") from None
    fraction = Fraction(int(match[7]), 10 ** len(match[7])) if match[7] else Fraction(0)
    whole_seconds = ((days * 24 + hour) * 60 + minute) * 60 + second
    nanos = (whole_seconds + fraction) * _NANOS_PER_SECOND - (offset or 0)
    return Moment(nanos, offset is not None)
