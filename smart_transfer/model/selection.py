"""What a workspace chooses to hold of a dataset's objects. The metadata chain is always whole (every
block, every checkpoint's manifest and pages); a selection chooses which checkpoint files (the latest
checkpoint's, or every checkpoint's) and which data slices (every one, none for a state-only bootstrap,
or those of one or more ranges: blocks, system time, the last N records). Pure data and the per-slice
rule: which objects of a chain a selection wants is ``sync/selection.py``'s, the workspace's record of
it ``repo/selection.py``'s, and how people write a range ``model/versions.py``'s (parsers)."""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

from smart_transfer.model.errors import ModelError

#: ``latest``: the files of the checkpoint a pull installs (a reader restores state from it); ``all``: the
#: files of every checkpoint of the chain.
CheckpointChoice = Literal["latest", "all"]
#: The largest value a range names (the protocol's Long): sequence numbers, microseconds, record counts.
_LONG_MAX = 2**63 - 1


def _bounded(value: object, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= _LONG_MAX


class InvalidSelection(ModelError):
    """A selection or slice range that breaks its own rules (two forms at once, a bound out of range, a
    range that ends before it starts): refused when made, from the SDK or from a record file alike."""


class SliceFacts(Struct, frozen=True):
    """What the slice rule looks at of one data slice: the block that added it (sequence number, system
    time in microseconds since the epoch) and the last offset it holds."""

    sequence_number: int
    system_micros: int
    last_offset: int


class SliceRange(Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """One range of data slices, in exactly one form: the slices added by blocks ``first_block`` to
    ``last_block`` (sequence numbers, inclusive; either end None for open), those added by blocks whose
    system time is at or after ``since`` (microseconds since the epoch), or those holding the last
    ``records`` records at the head (a slice with any of them counts whole)."""

    first_block: int | None = None
    last_block: int | None = None
    since: int | None = None
    records: int | None = None

    def __post_init__(self) -> None:
        """Checked once, wherever a range comes from (a parser, the SDK, a record file: msgspec reports
        this ValueError as a ValidationError when it decodes one)."""
        forms = [name for name, given in self._forms() if given]
        if len(forms) > 1:
            raise InvalidSelection(f"a slice range takes one form, not {' and '.join(forms)}")
        low = 1 if self.records is not None else 0
        for name in ("first_block", "last_block", "since", "records"):
            value = getattr(self, name)
            if value is not None and not _bounded(value, low):
                raise InvalidSelection(
                    f"a slice range's {name} must be a whole number from {low} to {_LONG_MAX}, not {value!r}"
                )
        if self.first_block is not None and self.last_block is not None and self.first_block > self.last_block:
            raise InvalidSelection(f"slice range blocks {self.first_block}-{self.last_block} end before they start")

    def _forms(self) -> tuple[tuple[str, bool], ...]:
        return (
            ("blocks", self.first_block is not None or self.last_block is not None),
            ("since", self.since is not None),
            ("records", self.records is not None),
        )

    def overlap(self, other: SliceRange) -> SliceRange | None:
        """The range of the slices both this range and ``other`` hold, when they have the same form (two
        forms, or blocks that do not meet: None, no slice is surely in both)."""
        if _EVERY_BLOCK in (other, self):
            return self if other == _EVERY_BLOCK else other
        if self.records is not None and other.records is not None:
            return SliceRange(records=min(self.records, other.records))
        if self.since is not None and other.since is not None:
            return SliceRange(since=max(self.since, other.since))
        if self._forms() != other._forms():
            return None  # two forms
        return _block_overlap(self, other)

    def holds(self, facts: SliceFacts, next_offset: int) -> bool:
        """Whether the slice ``facts`` describes is in this range; ``next_offset``: the offset after the
        head's last record (what "the last N records" counts back from)."""
        if self.records is not None:
            return facts.last_offset >= next_offset - self.records
        if self.since is not None:
            return facts.system_micros >= self.since
        first_ok = self.first_block is None or facts.sequence_number >= self.first_block
        return first_ok and (self.last_block is None or facts.sequence_number <= self.last_block)


class Selection(Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """The objects a pull moves besides the metadata: the files of the latest checkpoint only (the
    default) or of every checkpoint (``checkpoints="all"``); every data slice (``slices=None``, the
    default), none (``()``: state only), or those in any of ``slices``' ranges."""

    checkpoints: CheckpointChoice = "latest"
    slices: tuple[SliceRange, ...] | None = None

    def __post_init__(self) -> None:
        """Checked once, wherever a selection comes from (see ``SliceRange.__post_init__``)."""
        if self.checkpoints not in ("latest", "all"):
            raise InvalidSelection(f"a selection's checkpoints are 'latest' or 'all', not {self.checkpoints!r}")
        if self.slices is not None and (
            not isinstance(self.slices, tuple) or not all(isinstance(part, SliceRange) for part in self.slices)
        ):
            raise InvalidSelection(f"a selection's slices are None or a tuple of SliceRange, not {self.slices!r}")

    @property
    def every_slice(self) -> bool:
        """Whether every data slice is wanted."""
        return self.slices is None

    def wants_slice(self, facts: SliceFacts, next_offset: int) -> bool:
        """Whether the slice ``facts`` describes is wanted (``next_offset``: see ``SliceRange.holds``)."""
        return self.slices is None or any(part.holds(facts, next_offset) for part in self.slices)

    def narrower(self, other: Selection) -> Selection:
        """A selection that wants nothing either this one or ``other`` leaves out: what a workspace may
        record while it moves from a chain chosen by one to a chain chosen by the other (an object that
        neither wants in full is absent by choice meanwhile, never called lost)."""
        checkpoints: CheckpointChoice = "all" if self.checkpoints == other.checkpoints == "all" else "latest"
        if self.slices == other.slices or other.slices is None:
            slices = self.slices
        elif self.slices is None:
            slices = other.slices
        else:  # what both want: the overlap of each pair of ranges (one of two forms: none is sure)
            overlaps = (mine.overlap(theirs) for mine in self.slices for theirs in other.slices)
            slices = tuple(dict.fromkeys(part for part in overlaps if part is not None))
        return Selection(checkpoints, slices)

    def union(self, other: Selection) -> Selection:
        """A selection that wants everything this one or ``other`` wants (a fetch on demand widens the
        recorded selection by what it fetched)."""
        checkpoints: CheckpointChoice = "all" if "all" in (self.checkpoints, other.checkpoints) else "latest"
        if self.slices is None or other.slices is None:
            return Selection(checkpoints, None)
        return Selection(checkpoints, tuple(dict.fromkeys((*self.slices, *other.slices))))


def _block_overlap(one: SliceRange, other: SliceRange) -> SliceRange | None:
    """The blocks two ranges by blocks both name (None: they do not meet)."""
    firsts = [end for end in (one.first_block, other.first_block) if end is not None]
    lasts = [end for end in (one.last_block, other.last_block) if end is not None]
    first, last = max(firsts, default=None), min(lasts, default=None)
    if first is not None and last is not None and first > last:
        return None
    return SliceRange(first_block=first, last_block=last)


#: The range of every block (both ends open): it holds every slice.
_EVERY_BLOCK = SliceRange()
#: What a workspace with no record holds: everything (every pull moved every file before selections).
EVERYTHING = Selection(checkpoints="all")
#: What a plain pull chooses: every data slice and the latest checkpoint's files.
DEFAULT = Selection()
