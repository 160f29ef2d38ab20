"""Values as people type them: sizes and rates (``5M``, ``64MiB``, ``1.5G/s``, ``2048``) and durations
(``90``, ``30m``, ``1h``, ``2d``) and expiries (a duration from now, or an ISO-8601 time). One parser each, for
every flag and variable that takes one."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

from smart_transfer.config.values import BadValue, moment, real_number

_SIZE = re.compile(r"([0-9]{1,30}(?:\.[0-9]{1,30})?)\s*([kKmMgGtT]?)(?:i?[bB])?(?:/s)?")
_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def size(text: str) -> int:
    """``500K``, ``10M``, ``1.5MiB/s``, ``5T``, ``2048`` -> bytes (binary units); never negative (the
    setting's bounds say whether 0 is allowed)."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a size or rate: {text!r} (examples: 500K, 10M, 1G)")
    return int(float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()])


_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


def bucket(text: str) -> str:
    """An S3 bucket name as S3 allows them: 3-63 lowercase letters, digits, dots and hyphens, starting
    and ending with a letter or digit, no two dots in a row, not an IP address."""
    if not _BUCKET.fullmatch(text) or ".." in text or re.fullmatch(r"[0-9.]+", text):
        raise ValueError(f"not an S3 bucket name: {text!r} (3-63 of a-z, 0-9, '.', '-')")
    return text


_REGION = re.compile(r"(?![0-9]+$)[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?")
_HOST = re.compile(r"[A-Za-z0-9.-]+|[0-9A-Fa-f:.]+")


def region(text: str) -> str:
    """An S3 region name (``us-east-1``, ``eu-central-2``, or a custom one of the same letters; a host
    label, not all digits)."""
    if not _REGION.fullmatch(text):
        raise ValueError(f"not a region name: {text!r} (letters, digits and '-', e.g. us-east-1)")
    return text


#: A KMS key as S3 takes it: a key id, alias or ARN (letters, digits and ``-_/:.``), at most 2048 characters.
_KMS_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_/:.-]{0,2047}")


def kms_key_id(text: str) -> str:
    """A KMS key id, alias (``alias/name``) or ARN, as the value of a signed header must be written."""
    if not _KMS_KEY.fullmatch(text):
        raise ValueError(f"not a KMS key id: {text[:80]!r} (a key id, alias/NAME or an ARN: letters, digits, -_/:.)")
    return text


def http_url(text: str) -> str:
    """An endpoint URL: ``http(s)://HOST[:PORT][/PATH]`` with no credentials, query or fragment."""
    try:
        parts = urlsplit(text)
        port = parts.port  # a malformed port raises here
    except ValueError:
        raise ValueError(f"not a URL: {text!r} (malformed host or port)") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or not _HOST.fullmatch(parts.hostname) or port == 0:
        raise ValueError(f"not an http(s) URL: {text!r} (e.g. http://127.0.0.1:9000)")
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        raise ValueError("an endpoint URL holds no credentials, query or fragment")
    return text


def duration(text: str) -> float:
    """``90``, ``30m``, ``1h``, ``2d`` -> seconds; not negative."""
    stripped = text.strip()
    unit = _DURATION_UNITS.get(stripped[-1:], 1)
    number = stripped[:-1] if stripped[-1:] in _DURATION_UNITS else stripped
    try:
        value = real_number(number, "a duration") * unit
    except BadValue:
        raise ValueError(f"not a duration: {text!r} (examples: 90, 30m, 1h, 2d)") from None
    if not 0 <= value < float("inf"):
        raise ValueError(f"a duration cannot be negative: {text!r}")
    return value


#: How an expiry is written in files and messages: UTC, to the second (``2026-01-31T12:00:00Z``).
EXPIRY_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def expiry(text: str, now: datetime) -> datetime:
    """``30d``, ``12h``, ``90m`` (from ``now``) or an ISO-8601 date or time (UTC unless it names its offset)
    -> the UTC moment it names, to the second; later than ``now``."""
    try:
        when = (now + timedelta(seconds=duration(text))).replace(microsecond=0)
    except ValueError:
        when = _iso_time(text)
    except OverflowError:
        raise ValueError(f"too far in the future: {text!r}") from None
    if when <= now:
        raise ValueError(f"{text!r} is not in the future ({when.strftime(EXPIRY_FORMAT)} is not after now)")
    return when


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _iso_time(text: str) -> datetime:
    """An ISO-8601 date or time (the one rule: ``config/values.py``) as a UTC moment to the second (UTC
    when it names no offset)."""
    try:
        seconds = moment(text).nanos // 10**9
        return _EPOCH + timedelta(seconds=int(seconds))
    except BadValue:
        raise ValueError(
            f"not a duration or an ISO-8601 time: {text!r} (examples: 30d, 12h, 90m, 2030-01-31T12:00:00Z)"
        ) from None
    except OverflowError:
        raise ValueError(f"not a time this server can hold: {text!r}") from None
