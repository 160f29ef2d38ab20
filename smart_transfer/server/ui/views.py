"""What the pages show, built from the repository (blocking: call from a thread). Every value is
plain data; the templates escape it."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pyarrow as pa

from smart_transfer.model import (
    AddData,
    ChainTip,
    DataField,
    DataSlice,
    Multihash,
    Seed,
    SetDataSchema,
    SetInfo,
    decode_block,
)
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.errors import DatasetNotFound
from smart_transfer.repo.footer import schema_at
from smart_transfer.repo.growth import GrowthPoint, growth
from smart_transfer.repo.rows import ReadBudget, ReadBudgetExceeded, tail_from_store
from smart_transfer.server.rest_read import describe

#: Records the dataset page previews: ``smart-transfer tail``'s default count.
PREVIEW_ROWS = 20
#: Most bytes the preview reads from the store (Parquet footers and row groups).
PREVIEW_MAX_BYTES = 8 * 1024 * 1024
#: Characters of one preview value shown (longer ones end with an ellipsis).
PREVIEW_CELL_CHARS = 200
#: Heads whose summary, schema and description the pages remember (so a scan happens once per head).
HEADS_REMEMBERED = 1024
T = TypeVar("T")


@dataclass(frozen=True)
class DatasetRow:
    """One dataset as the list shows it."""

    name: str
    head: str
    blocks: int
    records: int
    data_bytes: int
    checkpoint_bytes: int
    last_commit: str

    def sort_key(self, column: str) -> Any:
        return getattr(self, column)


@dataclass(frozen=True)
class ChainRow:
    """One block as the chain table shows it."""

    sequence: int
    hash: str
    time: str
    kind: str
    records: int | None = None
    offsets: str = ""
    slice_bytes: int | None = None
    checkpoint_bytes: int | None = None
    detail: str = ""
    #: The data slice the block added (its downloads), if any.
    slice_hash: str = ""


@dataclass(frozen=True)
class About:
    """The newest schema and description on a chain (SetDataSchema, SetInfo)."""

    fields: tuple[DataField, ...] = ()
    description: str = ""
    keywords: tuple[str, ...] = ()
    #: Where the fields come from: "recorded" (a SetDataSchema), "footer" (the first slice's), or "".
    schema_source: str = ""


@dataclass
class Preview:
    """The last records: column names, rows of display text, bytes read, or why there are none."""

    columns: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    bytes_read: int = 0
    problem: str | None = None


def dataset_row(repo: DatasetRepository) -> DatasetRow:
    """A dataset's summary (its index brought up to its head)."""
    info = describe(repo, None)
    head_block = repo.cached_block(repo.hash_at(info.blocks - 1))
    last = decode_block(head_block).system_time if head_block is not None else ""
    return DatasetRow(info.name, info.head, info.blocks, info.records, info.data.bytes, info.checkpoints.bytes, last)


def _chain_row(sequence: int, block_hash: str, data: bytes) -> ChainRow:
    block = decode_block(data)
    event = block.event
    row = ChainRow(sequence, block_hash, block.system_time, type(event).__name__)
    if isinstance(event, AddData):
        piece = event.new_data
        return ChainRow(
            sequence,
            block_hash,
            block.system_time,
            row.kind,
            records=piece.num_records if piece else 0,
            offsets=f"{piece.offset_interval.start}-{piece.offset_interval.end}" if piece else "",
            slice_bytes=piece.size if piece else None,
            checkpoint_bytes=event.new_checkpoint.size if event.new_checkpoint else None,
            detail=f"watermark {event.new_watermark}" if event.new_watermark else "",
            slice_hash=str(piece.physical_hash) if piece else "",
        )
    if isinstance(event, SetDataSchema):
        return ChainRow(sequence, block_hash, block.system_time, row.kind, detail=f"{len(event.fields)} column(s)")
    if isinstance(event, SetInfo):
        return ChainRow(sequence, block_hash, block.system_time, row.kind, detail=event.description[:200])
    if isinstance(event, Seed):
        return ChainRow(sequence, block_hash, block.system_time, row.kind, detail=f"{event.kind} dataset")
    return row


def chain_rows(repo: DatasetRepository, tip: ChainTip, first: int, last: int) -> list[ChainRow]:
    """Blocks ``first..last`` (sequence numbers, inclusive) newest first, read in one index scan."""
    rows = []
    for offset, (block_hash, body) in enumerate(repo.chain_blocks(first, last)):
        rows.append(_chain_row(first + offset, str(block_hash), body))
    rows.reverse()
    return rows


class PerHead(Generic[T]):
    """Values computed from one head of a dataset (which never change: blocks are content-addressed),
    remembered for the last ``entries`` heads used."""

    def __init__(self, entries: int = HEADS_REMEMBERED) -> None:
        self._entries = entries
        self._known: OrderedDict[str, T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, name: str, head: Multihash, compute: Callable[[], T]) -> T:
        """The value for ``name`` at ``head``, computed on first use."""
        key = f"{name}\0{head}"
        with self._lock:
            if key in self._known:
                self._known.move_to_end(key)
                return self._known[key]
        value = compute()
        with self._lock:
            self._known[key] = value
            while len(self._known) > self._entries:
                self._known.popitem(last=False)
        return value


@dataclass
class Remembered:
    """What the pages remember per head: a dataset's summary (its object totals are a scan of the
    index) and its newest schema and description (a scan of the chain)."""

    summaries: PerHead[DatasetRow] = field(default_factory=PerHead)
    about: PerHead[About] = field(default_factory=PerHead)
    #: The growth curve's points (a scan of the chain, GROWTH_POINTS kept).
    growth: PerHead[list[GrowthPoint]] = field(default_factory=PerHead)

    def summary(self, repo: DatasetRepository) -> DatasetRow:
        """The summary at the stored head (one read of the head reference)."""
        head = repo.head()
        if head is None:
            raise DatasetNotFound(repo.name)
        return self.summaries.get(repo.name, head, lambda: dataset_row(repo))

    def about_of(self, repo: DatasetRepository, tip: ChainTip) -> About:
        return self.about.get(repo.name, tip.head, lambda: scan_about(repo, tip))

    def growth_of(self, repo: DatasetRepository, tip: ChainTip) -> list[GrowthPoint]:
        """Records and data bytes at up to GROWTH_POINTS blocks of the chain ending at ``tip``."""
        return self.growth.get(repo.name, tip.head, lambda: growth(repo, tip))


def _names_about(body: bytes, first_slice_wanted: bool) -> bool:
    """Whether a block's bytes may hold what the About scan keeps (cheaper than decoding each block)."""
    return b'"SetDataSchema"' in body or b'"SetInfo"' in body or (first_slice_wanted and b'"AddData"' in body)


def scan_about(repo: DatasetRepository, tip: ChainTip) -> About:
    """The newest SetDataSchema and SetInfo of the chain ending at ``tip``, found in one scan of the
    index (blocks whose bytes do not name those events are not decoded)."""
    schema: SetDataSchema | None = None
    info: SetInfo | None = None
    first: DataSlice | None = None
    for _, body in repo.chain_blocks(0, tip.sequence_number):
        if not _names_about(body, first is None):
            continue
        event = decode_block(body).event
        if isinstance(event, SetDataSchema):
            schema = event
        elif isinstance(event, SetInfo):
            info = event
        elif isinstance(event, AddData) and first is None:
            first = event.new_data
    fields, source = schema_at(repo, schema.fields if schema else None, first)
    return About(fields, info.description if info else "", info.keywords if info else (), source)


def cell_text(value: Any) -> str:
    """A value as ``smart-transfer tail`` prints it (null for a missing value), cut to a bound."""
    text = "null" if value is None else str(value)
    return text if len(text) <= PREVIEW_CELL_CHARS else text[: PREVIEW_CELL_CHARS - 1] + "…"


def preview(repo: DatasetRepository, tip: ChainTip, on_read: Any) -> Preview:
    """The last PREVIEW_ROWS records, read through the store within PREVIEW_MAX_BYTES; a problem
    (too large, unreadable) is said, never raised."""
    budget = ReadBudget(PREVIEW_MAX_BYTES)
    try:
        table = tail_from_store(repo, tip, PREVIEW_ROWS, budget, on_read)
    except ReadBudgetExceeded as exc:
        return Preview(bytes_read=budget.spent, problem=str(exc))
    except (pa.ArrowException, OSError, ValueError) as exc:
        return Preview(bytes_read=budget.spent, problem=f"the last records cannot be read: {exc}")
    columns = table.column_names
    rows = [[cell_text(record[name]) for name in columns] for record in table.to_pylist()]
    return Preview(columns, rows, budget.spent)
