"""The values of the pages about versions (blocking: call from a thread): one block (its event, the
slice it added and a page of that slice's rows read through the store within a byte bound, the files
of the checkpoint it added) and the comparison of two blocks (repo/compare.py's, which ``diff`` prints)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from smart_transfer.model import AddData, ChainTip, Checkpoint, ObjectKind, ObjectRef, decode_block
from smart_transfer.model.manifest import CheckpointFile
from smart_transfer.repo.compare import VersionComparison, VersionError, compare_versions, resolve_version
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.errors import RepositoryError
from smart_transfer.repo.rows import ReadBudget, ReadBudgetExceeded, slice_rows_from_store
from smart_transfer.repo.slices import SliceEntry
from smart_transfer.server.ui.pages import PageError, Paging
from smart_transfer.server.ui.views import PREVIEW_MAX_BYTES, PerHead, cell_text

#: Rows of a slice a block page shows at once, unless ``?per=`` says otherwise.
ROWS_PER_PAGE = 100
#: Files of a checkpoint a block page lists (the rest are counted).
CHECKPOINT_FILES_SHOWN = 1000
#: Slices a comparison page lists (the rest are counted; ``diff --json`` lists all).
COMPARE_SLICES_SHOWN = 200
#: Comparisons remembered (two blocks of a chain never change: they are content-addressed).
COMPARISONS_REMEMBERED = 256


@dataclass
class Rows:
    """One page of a slice's rows: column names, display text, the page, bytes read, or why none."""

    paging: Paging | None = None
    first: int = 0
    last: int = -1
    columns: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    bytes_read: int = 0
    problem: str | None = None


@dataclass
class Files:
    """The files of a checkpoint (the first CHECKPOINT_FILES_SHOWN), how many in all, or why none."""

    shown: list[CheckpointFile] = field(default_factory=list)
    total: int = 0
    problem: str | None = None


def _slice_rows(
    repo: DatasetRepository, entry: SliceEntry, page: int, per: int, on_read: Callable[[int], None]
) -> Rows:
    """Page ``page`` of the slice's rows (by offset), read by byte ranges within PREVIEW_MAX_BYTES; a
    problem (too large, unreadable) is said, never raised. A page past the end is a PageError 404."""
    paging = Paging.of(page, entry.data.num_records, per, "the slice")
    first = entry.first_offset + (paging.number - 1) * per
    last = min(entry.last_offset, first + per - 1)
    budget = ReadBudget(PREVIEW_MAX_BYTES)
    shown = Rows(paging, first, last)
    try:
        table = slice_rows_from_store(repo, entry, first, last, budget, on_read)
    except ReadBudgetExceeded as exc:
        shown.problem = str(exc)
    except (pa.ArrowException, OSError, ValueError) as exc:
        shown.problem = f"the slice's records cannot be read: {exc}"
    else:
        shown.columns = table.column_names
        shown.rows = [[cell_text(record[name]) for name in shown.columns] for record in table.to_pylist()]
    shown.bytes_read = budget.spent
    return shown


def _checkpoint_files(repo: DatasetRepository, checkpoint: Checkpoint) -> Files:
    try:
        manifest = repo.read_manifest(ObjectRef(ObjectKind.CHECKPOINT, checkpoint.physical_hash, checkpoint.size))
    except RepositoryError as exc:
        return Files(problem=str(exc))
    return Files(list(manifest.files[:CHECKPOINT_FILES_SHOWN]), len(manifest.files))


def _sequence(repo: DatasetRepository, tip: ChainTip, ref: str) -> int:
    try:
        return resolve_version(repo, tip, ref)
    except VersionError as exc:
        raise PageError(exc.status, str(exc)) from None


def block_page(
    repo: DatasetRepository, ref: str, page: int, per: int, on_read: Callable[[int], None]
) -> dict[str, Any]:
    """One block of the chain (by sequence number or hash): what it records, a page of the rows of the
    slice it added, the files of the checkpoint it added, and its neighbours."""
    tip = repo.require_tip()
    seq = _sequence(repo, tip, ref)
    block_hash = repo.hash_at(seq)
    block = decode_block(repo.block_bytes(block_hash))
    event = block.event
    entry = next_offset = None
    rows = files = None
    if isinstance(event, AddData) and event.new_data is not None:
        entry = SliceEntry(seq, block_hash, event.new_data)
        rows = _slice_rows(repo, entry, page, per, on_read)
    if isinstance(event, AddData) and event.new_checkpoint is not None:
        files = _checkpoint_files(repo, event.new_checkpoint)
    index_entry = repo.entry_at(seq)
    next_offset = index_entry[1] if index_entry else None
    return {
        "name": str(repo.name),
        "block": block,
        "block_hash": str(block_hash),
        "kind": type(event).__name__,
        "event": event,
        "slice": entry,
        "rows": rows,
        "files": files,
        "next_offset": next_offset,
        "last_sequence": tip.sequence_number,
    }


def comparison_of(
    repo: DatasetRepository, remembered: PerHead[VersionComparison], base: str | None, target: str | None
) -> VersionComparison:
    """The comparison of two blocks (defaults: block 0 and the head), remembered by their hashes."""
    tip = repo.require_tip()
    try:
        first = resolve_version(repo, tip, base) if base else 0
        last = resolve_version(repo, tip, target) if target else tip.sequence_number
        key = f"{repo.name}\0{repo.hash_at(first)}"
        return remembered.get(key, repo.hash_at(last), lambda: compare_versions(repo, tip, str(first), str(last)))
    except VersionError as exc:
        raise PageError(exc.status, str(exc)) from None


def compare_page(
    repo: DatasetRepository, remembered: PerHead[VersionComparison], base: str | None, target: str | None
) -> dict[str, Any]:
    """The comparison page's values: the comparison and the slices it lists."""
    comparison = comparison_of(repo, remembered, base, target)
    return {
        "name": str(repo.name),
        "comparison": comparison,
        "slices": comparison.slices[:COMPARE_SLICES_SHOWN],
        "last_sequence": repo.require_tip().sequence_number,
    }
