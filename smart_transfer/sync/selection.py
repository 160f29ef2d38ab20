"""Which objects of a chain a selection wants (``model/selection.py``), and which it leaves out by
choice: one rule, asked by the pull (what to move), verify and status (absent by choice, never lost),
the reads (absent: fetch or say how), the drop of local files and the push (what it cannot send). The
metadata is always wanted: every checkpoint's manifest and its pages; checkpoint files and data slices
are chosen."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from msgspec import Struct

from smart_transfer.model import ChainTip, Multihash, NewBlock, ObjectKind, ObjectRef
from smart_transfer.model.events import AddData
from smart_transfer.model.manifest import CheckpointManifest
from smart_transfer.model.objects import referenced_objects
from smart_transfer.model.selection import EVERYTHING, Selection, SliceFacts, SliceRange

_EPOCH = datetime(1970, 1, 1)
_MICROSECOND = timedelta(microseconds=1)


class ObjectSplit(Struct, frozen=True):
    """Every object of a chain, split: those the selection wants, and those it leaves out by choice."""

    wanted: list[ObjectRef]
    left_out: list[ObjectRef]


def slice_facts(item: NewBlock) -> SliceFacts | None:
    """What the slice rule looks at of the data slice ``item`` adds (None: it adds none)."""
    event = item.block.event
    if not isinstance(event, AddData) or event.new_data is None:
        return None
    block = item.block
    return SliceFacts(block.sequence_number, system_micros(block.system_time), event.new_data.offset_interval.end)


def system_micros(text: str) -> int:
    """A block's system time (RFC 3339 UTC, ``model/events.py`` TIMESTAMP_PATTERN, checked when the block
    was) in microseconds since the epoch, finer digits dropped. Plain integer arithmetic: it runs once per
    slice of a chain, and a time's exact parser (``config/values.py`` moment) is for what people write."""
    try:
        whole = datetime.fromisoformat(text[:19])
    except ValueError:
        return 0  # validated blocks never get here; a time no range can name sorts first
    digits = text[20:-1] if text[19:20] == "." else ""
    return (whole - _EPOCH) // _MICROSECOND + int((digits + "000000")[:6])


class ChainView(Struct, frozen=True):
    """A chain as the one rule sees it: every caller that classifies objects (a pull, verify, status, the
    reads, a drop) builds one and asks ``split_objects``; none assembles the rule's inputs its own way.

    ``blocks``: the chain's blocks (oldest first; from block 0 for a whole chain). ``manifests``: the
    checkpoints whose pages and files are split (one not given is left alone). ``latest``: the manifest
    hash of the checkpoint a reader restores (its files are always wanted). ``next_offset``: the offset
    after the head's last record, what "the last N records" counts back from (None: after the last slice
    of ``blocks``). ``unpushed_from``: the sequence number of the first block no remote holds as far as
    the workspace knows (after the remote head it last synced; 0: no remote holds any): the objects of
    that block and later ones exist nowhere else, so every selection wants them (a missing one is lost,
    never absent by choice, and never dropped). None: every block is on the remote (a pull's chain)."""

    blocks: list[NewBlock]
    manifests: Mapping[Multihash, CheckpointManifest] = {}
    latest: Multihash | None = None
    next_offset: int | None = None
    unpushed_from: int | None = None


def split_objects(chain: ChainView, selection: Selection) -> ObjectSplit:
    """Split what ``chain``'s blocks reference (slices and checkpoint manifests) and the pages and files of
    each checkpoint whose manifest it gives, by ``selection``. An object shared by a wanted slice or
    checkpoint is wanted; so is every object of a block after the remote head (``ChainView``)."""
    wanted: dict[tuple[ObjectKind, Multihash], ObjectRef] = {}
    chosen_out: dict[tuple[ObjectKind, Multihash], ObjectRef] = {}
    _split_slices(chain.blocks, selection, chain.next_offset, wanted, chosen_out)
    for ref in list(wanted.values()):
        manifest = chain.manifests.get(ref.physical_hash) if ref.kind is ObjectKind.CHECKPOINT else None
        if manifest is not None:
            chosen = selection.checkpoints == "all" or ref.physical_hash == chain.latest
            _split_checkpoint(manifest, chosen, wanted, chosen_out)
    if chain.unpushed_from is not None:
        unpushed = [item for item in chain.blocks if item.block.sequence_number >= chain.unpushed_from]
        if unpushed:  # only here: every one of their objects wanted, a checkpoint's files too
            every = split_objects(ChainView(unpushed, chain.manifests, chain.latest), EVERYTHING)
            wanted.update(((ref.kind, ref.physical_hash), ref) for ref in every.wanted)
    left_out = [ref for key, ref in chosen_out.items() if key not in wanted]
    return ObjectSplit(list(wanted.values()), left_out)


def _split_slices(
    items: Sequence[NewBlock],
    selection: Selection,
    next_offset: int | None,
    wanted: dict[tuple[ObjectKind, Multihash], ObjectRef],
    chosen_out: dict[tuple[ObjectKind, Multihash], ObjectRef],
) -> None:
    """What the blocks reference: their data slices, wanted when ``selection`` wants them, and the rest
    (checkpoint manifests: metadata, always wanted)."""
    facts = [slice_facts(item) for item in items]
    if next_offset is None:
        next_offset = max((f.last_offset + 1 for f in facts if f is not None), default=0)
    for item, fact in zip(items, facts, strict=True):
        for ref in referenced_objects(item.block):
            key = (ref.kind, ref.physical_hash)
            if ref.kind is ObjectKind.DATA and fact is not None and not selection.wants_slice(fact, next_offset):
                chosen_out.setdefault(key, ref)
            else:
                wanted.setdefault(key, ref)


def _split_checkpoint(
    manifest: CheckpointManifest,
    chosen: bool,
    wanted: dict[tuple[ObjectKind, Multihash], ObjectRef],
    chosen_out: dict[tuple[ObjectKind, Multihash], ObjectRef],
) -> None:
    """A checkpoint's pages (metadata: always wanted) and files (wanted when ``chosen``)."""
    for page_hash, data in manifest.pages[1:]:  # a paged manifest's pages below its root
        wanted.setdefault((ObjectKind.CHECKPOINT, page_hash), ObjectRef(ObjectKind.CHECKPOINT, page_hash, len(data)))
    for item in manifest.files:
        key = (ObjectKind.CHECKPOINT, item.physical_hash)
        ref = ObjectRef(ObjectKind.CHECKPOINT, item.physical_hash, item.size)
        (wanted if chosen else chosen_out).setdefault(key, ref)


def bundle_next_offset(blocks: Iterable[NewBlock], base: ChainTip | None) -> int:
    """The offset after the last record of the chain that ``blocks`` extend from ``base`` (the head's:
    what "the last N records" counts back from)."""
    ends = [facts.last_offset + 1 for facts in map(slice_facts, blocks) if facts is not None]
    if ends:
        return max(ends)
    return base.next_offset if base is not None else 0


def range_past_head(selection: Selection, head_sequence: int | None, command: str = "pull") -> str | None:
    """Why ``selection`` names blocks the chain (head at ``head_sequence``; None: an empty chain) does not
    have (a range by blocks that ends, or starts, past the head), or None: a pull refuses such a range
    once the server sent the chain, before it moves or records anything, a drop before it records or
    deletes anything (``command`` names which, in the words)."""
    for part in selection.slices or ():
        end = part.last_block if part.last_block is not None else part.first_block
        if end is not None and (head_sequence is None or end > head_sequence):
            head = "an empty chain" if head_sequence is None else f"the head is block {head_sequence}"
            return f"blocks {_written(part)} reach past the head ({head}); {command} a range up to it"
    return None


def _written(part: SliceRange) -> str:
    first = "" if part.first_block is None else str(part.first_block)
    return f"{first}-{'' if part.last_block is None else part.last_block}"
