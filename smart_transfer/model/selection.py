"""What a workspace chooses to hold of a dataset's objects. The metadata chain is always whole (every
block, every checkpoint's manifest and pages); a selection chooses which checkpoint files (the latest
checkpoint's, or every checkpoint's) and which data slices (every one, none for a state-only bootstrap,
or those of one or more ranges: blocks, system time, the last N records). Pure data and the per-slice
rule: which objects of a chain a selection wants is ``sync/selection.py``'s, the workspace's record of
it ``repo/selection.py``'s, and how people write a range ``model/versions.py``'s (parsers)."""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

#: ``latest``: the files of the checkpoint a pull installs (a reader restores state from it); ``all``: the
#: files of every checkpoint of the chain.
CheckpointChoice = Literal["latest", "all"]


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
        else:
            slices = ()  # two different ranges: nothing is surely wanted by both
        return Selection(checkpoints, slices)

    def union(self, other: Selection) -> Selection:
        """A selection that wants everything this one or ``other`` wants (a fetch on demand widens the
        recorded selection by what it fetched)."""
        checkpoints: CheckpointChoice = "all" if "all" in (self.checkpoints, other.checkpoints) else "latest"
        if self.slices is None or other.slices is None:
            return Selection(checkpoints, None)
        return Selection(checkpoints, tuple(dict.fromkeys((*self.slices, *other.slices))))


#: What a workspace with no record holds: everything (every pull moved every file before selections).
EVERYTHING = Selection(checkpoints="all")
#: What a plain pull chooses: every data slice and the latest checkpoint's files.
DEFAULT = Selection()
