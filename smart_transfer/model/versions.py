"""Versions and block references as users write them, read once for every face: a block's sequence number
or its full hash (``diff``, the web view's block and comparison pages), and a range of sequence numbers or
offsets (``export --blocks``, ``--offsets``), and what a pull selects (``pull --blocks``, ``--since``,
``--last``, ``--state-only``: ``pull_selection``, for the command line and the SDK). Text that is none
of these, or a number beyond the protocol's Long, is a :class:`~smart_transfer.config.values.BadValue`;
whether a well-formed one names a block of a chain is the repository's question (``repo/compare.py``:
``resolve_version``)."""

from __future__ import annotations

import math
import re
import time
from datetime import datetime

from smart_transfer.config.values import LONG_MAX, BadValue, moment, quoted, whole_number
from smart_transfer.model.errors import InvalidMultihash
from smart_transfer.model.multihash import Multihash
from smart_transfer.model.selection import CheckpointChoice, Selection, SliceRange

#: An inclusive range; either end None for open.
Range = tuple[int | None, int | None]
_NUMBER = re.compile(r"[+-]?[0-9]+")
_RANGE = re.compile(r"([0-9]*)-([0-9]*)|([0-9]+)")
#: How errors name each slice range: the command line's flag and the SDK's keyword, one text for both.
_BLOCKS, _SINCE, _LAST = "--blocks (blocks=)", "--since (since=)", "--last (last=)"


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


def pull_selection(
    *,
    all_checkpoints: bool = False,
    state_only: bool = False,
    blocks: str | Range | None = None,
    since: str | datetime | None = None,
    last: str | int | None = None,
    now_micros: int | None = None,
    command: str = "pull",
) -> Selection:
    """What a pull moves besides the metadata, as the command line's flags and the SDK's keywords give it:
    ``all_checkpoints`` (every checkpoint's files, not only the latest's), and at most one of
    ``state_only`` (no data slices), ``blocks`` (``FIRST-LAST`` as ``number_range`` reads it, or a pair),
    ``since`` (a moment as ``config.values.moment`` reads it, UTC unless it names a zone, or an aware
    datetime; not after ``now_micros``, default now) and ``last`` (a number of records, 1 to LONG_MAX).
    None of them: every slice. BadValue for a malformed or future value, or for two of them at once
    (errors name the flag and the keyword, ``--last (last=)``: the command line and the SDK read them;
    ``command``: what takes the range, for the words)."""
    given = [flag for flag, value in _slice_flags(state_only, blocks, since, last) if value]
    if len(given) > 1:
        raise BadValue(f"{given[0]} and {given[1]} contradict each other: a {command} takes one range of slices")
    checkpoints: CheckpointChoice = "all" if all_checkpoints else "latest"
    if state_only:
        return Selection(checkpoints, ())
    if blocks is not None:
        first, last_block = number_range(blocks, _BLOCKS) if isinstance(blocks, str) else _pair(blocks)
        return Selection(checkpoints, (SliceRange(first_block=first, last_block=last_block),))
    if since is not None:
        return Selection(checkpoints, (SliceRange(since=_since(since, now_micros)),))
    if last is not None:
        records = whole_number(last, _LAST, 1, LONG_MAX) if isinstance(last, str) else _records(last)
        return Selection(checkpoints, (SliceRange(records=records),))
    return Selection(checkpoints)


def _slice_flags(state_only: bool, blocks: object, since: object, last: object) -> tuple[tuple[str, bool], ...]:
    return (
        ("--state-only (state_only=)", state_only),
        (_BLOCKS, blocks is not None),
        (_SINCE, since is not None),
        (_LAST, last is not None),
    )


def _pair(blocks: Range) -> Range:
    """A range given as a pair of sequence numbers (either None for open), checked like ``number_range``."""
    first, last = blocks
    for end in (first, last):
        if end is not None and (isinstance(end, bool) or not isinstance(end, int) or not 0 <= end <= LONG_MAX):
            raise BadValue(f"{_BLOCKS} ends must be whole numbers from 0 to {LONG_MAX} or None, not {end!r}")
    if first is not None and last is not None and first > last:
        raise BadValue(f"{_BLOCKS} range {first}-{last} ends before it starts")
    return first, last


def _records(last: int) -> int:
    if isinstance(last, bool) or not isinstance(last, int) or not 1 <= last <= LONG_MAX:
        raise BadValue(f"{_LAST} must be a whole number from 1 to {LONG_MAX}, not {last!r}")
    return last


def _since(since: str | datetime, now_micros: int | None) -> int:
    """The microsecond ``since`` falls in, rounded down as blocks' times are (``sync/selection.py``
    ``system_micros`` drops finer digits: a block at exactly ``since`` is "at or after" it; a slice a
    little earlier in the same microsecond comes too, harmless), refused when it is in the future (no
    block has that time yet). A moment before 1970 is 1970's first: no block is older."""
    if isinstance(since, datetime):
        if since.tzinfo is None:
            raise BadValue(f"{_SINCE}: a datetime must name its zone (e.g. tzinfo=timezone.utc)")
        since = since.isoformat()
    micros = max(0, math.floor(moment(since, _SINCE).nanos / 1000))
    now = now_micros if now_micros is not None else time.time_ns() // 1000
    if micros > now:
        raise BadValue(f"{_SINCE} {quoted(since)} is in the future: no block has that system time yet")
    return micros
