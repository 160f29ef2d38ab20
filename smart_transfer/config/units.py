"""Values as people type them: sizes and rates (``5M``, ``64MiB``, ``1.5G/s``, ``2048``) and durations
(``90``, ``30m``, ``1h``, ``2d``). One parser each, for every flag and variable that takes one."""

from __future__ import annotations

import re

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?(?:/s)?")
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


def duration(text: str) -> float:
    """``90``, ``30m``, ``1h``, ``2d`` -> seconds; not negative."""
    stripped = text.strip()
    try:
        if stripped and stripped[-1] in _DURATION_UNITS:
            value = float(stripped[:-1]) * _DURATION_UNITS[stripped[-1]]
        else:
            value = float(stripped)
    except ValueError:
        raise ValueError(f"not a duration: {text!r} (examples: 90, 30m, 1h, 2d)") from None
    if not value >= 0:  # also refuses nan
        raise ValueError(f"a duration cannot be negative: {text!r}")
    return value
