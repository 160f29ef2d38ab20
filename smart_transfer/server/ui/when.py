"""Times as people read them: "3 minutes ago", relative to when the page is built (on the server, so
the pages need no script for it), and the exact UTC time a page shows on hover."""

from __future__ import annotations

from datetime import UTC, datetime

#: Units of a relative time, largest first, in seconds.
UNITS = (("year", 365 * 86400), ("month", 30 * 86400), ("day", 86400), ("hour", 3600), ("minute", 60))


def parsed(text: str) -> datetime | None:
    """An RFC 3339 time (blocks record UTC ones like 2024-01-31T12:00:00.123456Z), None if it is not one."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def ago(text: str, now: datetime | None = None) -> str:
    """How long before ``now`` the time ``text`` was: "just now", "3 minutes ago", "1 day ago" ("in 2
    hours" for a clock ahead of the server's); the text itself if it is not a time."""
    moment = parsed(text)
    if moment is None:
        return text
    seconds = int(((now or datetime.now(UTC)) - moment).total_seconds())
    for unit, length in UNITS:
        count = abs(seconds) // length
        if count:
            amount = f"{count} {unit}{'' if count == 1 else 's'}"
            return f"{amount} ago" if seconds > 0 else f"in {amount}"
    return "just now"


def utc_text(text: str) -> str:
    """The exact time, to the second, in UTC: 2024-01-31 12:00:00 UTC (the text itself if not a time)."""
    moment = parsed(text)
    return text if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
