"""Two versions of a dataset compared: the blocks after one up to the other, the slices and records they
added, the bytes, and the schema column by column. One function for every face: ``smart-transfer diff``
(a workspace dataset) and the web view's comparison page (a server dataset) both call
``compare_versions``.

A version is a block of the current chain, named by its sequence number or its full hash (``resolve_version``).
The schema at a version is the newest ``SetDataSchema`` at or before it; where there is none, the Parquet
footer of the newest slice at or before it (``slice_fields``: the rule the web view and Delta Sharing use for
a chain without one, read at each version so that a column a later slice adds shows as added); none if
there is no slice or it is not Parquet."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from smart_transfer.config.values import BadValue, quoted
from smart_transfer.model import (
    AddData,
    ChainTip,
    DataField,
    DataSlice,
    SetDataSchema,
    decode_block,
)
from smart_transfer.model.versions import block_ref
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.errors import CorruptRepository, RepositoryError
from smart_transfer.repo.footer import schema_at
from smart_transfer.repo.slices import NEW_DATA


class VersionError(RepositoryError):
    """A version that names no block of the chain (``status`` 404), or a malformed or backwards pair (400)."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(message)


@dataclass(frozen=True)
class Version:
    """One block of the chain as a version: where it is, when, and the records the dataset held then."""

    sequence_number: int
    hash: str
    system_time: str
    records: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "sequence_number": self.sequence_number,
            "hash": self.hash,
            "system_time": self.system_time,
            "records": self.records,
        }


@dataclass(frozen=True)
class AddedSlice:
    """A data slice one of the compared blocks added."""

    sequence_number: int
    block_hash: str
    physical_hash: str
    size: int
    records: int
    first_offset: int
    last_offset: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ColumnChange:
    """One column that differs between the two schemas: ``added``, ``removed`` or ``changed`` (type or
    nullability), with its field before and after (None where it is absent)."""

    name: str
    change: str
    before: DataField | None
    after: DataField | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "change": self.change,
            "before": self.before.to_dict() if self.before else None,
            "after": self.after.to_dict() if self.after else None,
        }


@dataclass(frozen=True)
class VersionComparison:
    """What the blocks after ``base`` up to and including ``target`` changed."""

    dataset: str
    base: Version
    target: Version
    events: dict[str, int]
    slices: tuple[AddedSlice, ...]
    data_bytes: int
    checkpoints: int
    checkpoint_bytes: int
    schema_before: tuple[DataField, ...]
    schema_after: tuple[DataField, ...]
    schema_changes: tuple[ColumnChange, ...]
    #: Where each schema comes from: "recorded" (a SetDataSchema), "footer" (a slice's), or "" (none).
    schema_sources: tuple[str, str] = ("", "")

    @property
    def blocks(self) -> int:
        return self.target.sequence_number - self.base.sequence_number

    @property
    def records(self) -> int:
        return self.target.records - self.base.records

    def to_dict(self) -> dict[str, Any]:
        """The comparison as ``diff --json`` prints it."""
        return {
            "dataset": self.dataset,
            "from": self.base.to_dict(),
            "to": self.target.to_dict(),
            "blocks": self.blocks,
            "events": dict(self.events),
            "records": self.records,
            "data_bytes": self.data_bytes,
            "checkpoints": self.checkpoints,
            "checkpoint_bytes": self.checkpoint_bytes,
            "slices": [s.to_dict() for s in self.slices],
            "schema_before": [f.to_dict() for f in self.schema_before],
            "schema_after": [f.to_dict() for f in self.schema_after],
            "schema_changes": [c.to_dict() for c in self.schema_changes],
            "schema_source_before": self.schema_sources[0],
            "schema_source_after": self.schema_sources[1],
        }


#: Canonical block bytes name these only as keys and values of the block itself (inside a text value
#: a quote is escaped), so a block without NEW_DATA (repo/slices.py) and the latter adds no slice and no
#: checkpoint.
_ADD_DATA = b'"type":"AddData"'
_NEW_CHECKPOINT = b'"new_checkpoint":'


def resolve_version(repo: DatasetRepository, tip: ChainTip, text: str) -> int:
    """The sequence number of the block ``text`` names on the chain ending at ``tip``: a sequence number
    (0 to the head's) or a block's full hash, read by the one rule (``model/versions.py``). VersionError:
    400 for text that names no block at all, 404 for a block this chain does not have."""
    last = tip.sequence_number
    try:
        ref = block_ref(text)
    except BadValue:
        shown = quoted(text.strip())
        raise VersionError(400, f"not a block: {shown} (a sequence number from 0 to {last} or a block hash)") from None
    if isinstance(ref, int):
        if ref > last:
            raise VersionError(404, f"{repo.name} has no block {ref}: its blocks are 0 to {last}")
        return ref
    seq = repo.sequence_of(ref)
    if seq is None or seq > last:
        raise VersionError(404, f"{repo.name} has no block {ref} on its chain")
    return seq


def _version(repo: DatasetRepository, seq: int, data: bytes) -> Version:
    entry = repo.required_entry(seq)
    return Version(seq, str(entry[0]), decode_block(data).system_time, entry[1])


def schema_changes(before: tuple[DataField, ...], after: tuple[DataField, ...]) -> tuple[ColumnChange, ...]:
    """Column by column, in the new schema's order then the removed ones: what differs."""
    old = {f.name: f for f in before}
    new = {f.name: f for f in after}
    changes = []
    for name, column in new.items():
        previous = old.get(name)
        if previous is None:
            changes.append(ColumnChange(name, "added", None, column))
        elif previous != column:
            changes.append(ColumnChange(name, "changed", previous, column))
    changes.extend(ColumnChange(name, "removed", column, None) for name, column in old.items() if name not in new)
    return tuple(changes)


def _schema_in(body: bytes) -> tuple[DataField, ...] | None:
    """The columns a block records, if it is a SetDataSchema (bytes that do not name it are not decoded)."""
    if b'"SetDataSchema"' not in body:
        return None
    event = decode_block(body).event
    return event.fields if isinstance(event, SetDataSchema) else None


@dataclass
class _Tally:
    """What the scan has seen: the schema at the base and at the newest block so far, and what the
    blocks after the base added."""

    schema_before: tuple[DataField, ...] | None = None
    schema_after: tuple[DataField, ...] | None = None
    #: The newest block at or before the base that added a slice (decoded only if its footer is wanted).
    base_slice_block: bytes | None = None
    #: The newest slice the blocks after the base added.
    newest_slice: DataSlice | None = None
    events: Counter[str] = field(default_factory=Counter)
    slices: list[AddedSlice] = field(default_factory=list)
    checkpoints: int = 0
    checkpoint_bytes: int = 0

    def add(self, seq: int, block_hash: str, body: bytes, after_base: bool) -> None:
        fields = _schema_in(body)
        if fields is not None:
            self.schema_after = fields
            self.schema_before = self.schema_before if after_base else fields
        if not after_base:
            if NEW_DATA in body:
                self.base_slice_block = body
            return
        if _ADD_DATA in body and NEW_DATA not in body and _NEW_CHECKPOINT not in body:
            self.events["AddData"] += 1  # a watermark: nothing else to count, no need to decode it
            return
        event = decode_block(body).event
        self.events[type(event).__name__] += 1
        if not isinstance(event, AddData):
            return
        if event.new_data is not None:
            piece, interval = event.new_data, event.new_data.offset_interval
            self.newest_slice = piece
            self.slices.append(
                AddedSlice(
                    seq,
                    str(block_hash),
                    str(piece.physical_hash),
                    piece.size,
                    piece.num_records,
                    interval.start,
                    interval.end,
                )
            )
        if event.new_checkpoint is not None:
            self.checkpoints += 1
            self.checkpoint_bytes += event.new_checkpoint.size

    def schemas(self, repo: DatasetRepository) -> tuple[tuple[DataField, ...], tuple[DataField, ...], tuple[str, str]]:
        """The schema at the base and at the target, and where each comes from (a slice's footer is read
        only for a version with no SetDataSchema, once when both versions have the same newest slice)."""
        base_slice = None
        if self.base_slice_block is not None:
            event = decode_block(self.base_slice_block).event
            base_slice = event.new_data if isinstance(event, AddData) else None
        before, source_before = schema_at(repo, self.schema_before, base_slice)
        target_slice = self.newest_slice or base_slice
        if self.schema_after is None and target_slice == base_slice and self.schema_before is None:
            return before, before, (source_before, source_before)
        after, source_after = schema_at(repo, self.schema_after, target_slice)
        return before, after, (source_before, source_after)


def compare_versions(
    repo: DatasetRepository, tip: ChainTip, base: str | None = None, target: str | None = None
) -> VersionComparison:
    """Compare version ``base`` (default: block 0, the Seed) with ``target`` (default: the head) of the
    chain ending at ``tip``, in one scan of the index up to ``target``. VersionError for a version
    that names no block, or a ``base`` after ``target``."""
    first = resolve_version(repo, tip, base) if base is not None else 0
    last = resolve_version(repo, tip, target) if target is not None else tip.sequence_number
    if first > last:
        raise VersionError(400, f"from (block {first}) is after to (block {last}): compare an older block with a newer")
    tally = _Tally()
    ends: dict[int, Version] = {}
    for seq, (block_hash, body) in enumerate(repo.chain_hash_texts(0, last)):
        if seq in (first, last):
            ends[seq] = _version(repo, seq, body)
        tally.add(seq, block_hash, body, after_base=seq > first)
    if first not in ends or last not in ends:
        raise CorruptRepository(f"index of {repo.name} ends before block {last}; delete the index to rebuild it")
    before, after, sources = tally.schemas(repo)
    return VersionComparison(
        str(repo.name),
        ends[first],
        ends[last],
        dict(sorted(tally.events.items())),
        tuple(tally.slices),
        sum(s.size for s in tally.slices),
        tally.checkpoints,
        tally.checkpoint_bytes,
        before,
        after,
        schema_changes(before, after),
        sources,
    )
