"""Reading a dataset back: the data slices of a workspace's committed chain as files, an Arrow table, a
pandas or a Spark DataFrame, whole or for a range of offsets or blocks.

A ``LocalDataset`` is pinned to the head the dataset had when it was opened: it only ever reads
slices that committed chain references, and those were verified (hash and size) before the pull or
ingest that brought them committed, so a half-pulled state is never visible. A slice that is missing,
truncated or was moved to quarantine by ``verify`` is one clear ``LocalError`` naming it.

Rows are read from the slices' Parquet files with pyarrow: only the row groups whose ``offset``
statistics meet the requested range are read, so the last rows of a long dataset cost a few index
lookups and one row group. Slices whose schemas differ (a column added, int32 then int64) are read
as one table with the columns and types unified (missing columns are null)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import pyarrow as pa
import pyarrow.parquet as pq

from smart_transfer.errors import LocalError, sdk_errors
from smart_transfer.model import Multihash
from smart_transfer.model.events import OFFSET_COLUMN
from smart_transfer.model.versions import Range
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.reading.absent import AbsentByChoice, FetchAbsent, absent_runs, slices_left_out
from smart_transfer.reading.chain_view import files_absent
from smart_transfer.repo import Workspace
from smart_transfer.repo.compare import compare_versions
from smart_transfer.repo.rows import combined_schema, conform, empty_table, last_records, read_rows
from smart_transfer.repo.slices import ChainSlices, SliceEntry
from smart_transfer.storage import ObjectNotFound

if TYPE_CHECKING:
    import pandas

    from smart_transfer.repo.compare import VersionComparison

#: Slice footers a comparison reads at most (the schema at each of its two versions): each may be fetched.
_FOOTERS_READ = 2


def _bounds(wanted: Range, last: int, what: str, name: str) -> tuple[int, int]:
    """``wanted`` with open ends filled in, checked to lie within ``0..last``."""
    first, end = (0 if wanted[0] is None else wanted[0]), (last if wanted[1] is None else wanted[1])
    if last < 0:
        raise LocalError(ErrorCode.INVALID_INTERVAL, f"{name} has no records yet")
    if not 0 <= first <= end <= last:
        raise LocalError(ErrorCode.INVALID_INTERVAL, f"{name}: {what} {first}-{end} are not within its {what} 0-{last}")
    return first, end


@dataclass(frozen=True)
class Selection:
    """The slices a read touches (in chain order) and the offsets of the records it wants from them."""

    entries: list[SliceEntry]
    first: int
    last: int

    def whole(self, entry: SliceEntry) -> bool:
        """Whether every record of ``entry`` is wanted."""
        return self.first <= entry.first_offset and entry.last_offset <= self.last


class LocalDataset:
    """A dataset of a workspace, pinned at the head it had when opened. Open one with
    ``SyncClient.dataset(name)``, ``Client.dataset(name)`` or ``open_dataset(workspace_dir, name)``.

    ``offsets=(first, last)`` selects records by offset, ``blocks=(first, last)`` the slices added by
    those blocks (sequence numbers); both inclusive, either end None for open. Raises LocalError.

    In a partial workspace (a pull of a range, or a drop) a read of slices absent by choice raises
    ``AbsentByChoice`` (naming them and the pull that gets them) unless ``fetch`` is given: then it calls
    ``fetch(name, selection)`` once to pull them (verified and stored like any pull) and reads on. None
    by default: a read never goes to the network unless asked."""

    def __init__(
        self, workspace: Workspace, name: str, *, owns_workspace: bool = False, fetch: FetchAbsent | None = None
    ) -> None:
        self.workspace = workspace
        self._owns_workspace = owns_workspace
        self._fetch = fetch
        with sdk_errors():
            dataset = workspace.dataset(name)
            self._chain = ChainSlices(dataset, dataset.require_tip())
        self.name = str(dataset.name)

    @property
    def head(self) -> str:
        """The head block the dataset is pinned at."""
        return str(self._chain.tip.head)

    @property
    def blocks(self) -> int:
        return self._chain.tip.sequence_number + 1

    @property
    def records(self) -> int:
        return self._chain.tip.next_offset

    def select(self, *, offsets: Range | None = None, blocks: Range | None = None) -> Selection:
        """The slices (in chain order) holding the selected records (metadata only; no file is read)."""
        tip = self._chain.tip
        with sdk_errors():
            if offsets is not None and blocks is not None:
                raise LocalError(ErrorCode.INVALID_REQUEST, "select by offsets or by blocks, not both")
            if blocks is not None:
                first, last = _bounds(blocks, tip.sequence_number, "blocks", self.name)
                entries = list(self._chain.in_blocks(first, last))
                return Selection(entries, 0, tip.next_offset - 1)
            if offsets is None and tip.next_offset == 0:
                return Selection([], 0, -1)
            first, last = _bounds(offsets or (None, None), tip.next_offset - 1, "offsets", self.name)
            return Selection(self._chain.for_offsets(first, last), first, last)

    def slices(self, *, offsets: Range | None = None, blocks: Range | None = None) -> list[SliceEntry]:
        """The data slices holding the selected records, in chain order."""
        return self.select(offsets=offsets, blocks=blocks).entries

    def files(self, *, offsets: Range | None = None, blocks: Range | None = None) -> list[Path]:
        """The Parquet files of the selected slices, in chain order, each checked present and whole."""
        entries = self.slices(offsets=offsets, blocks=blocks)
        self.require(entries)
        return [self.path_of(entry) for entry in entries]

    def require(self, entries: Sequence[SliceEntry]) -> None:
        """Make sure no slice of ``entries`` is absent by choice: fetch those that are (when this handle
        was given ``fetch``), else AbsentByChoice naming them. A lost slice is left to ``path_of`` to name
        (a pull repairs it, a fetch of a range does not call it absent)."""
        absent = self._absent(entries)
        if not absent:
            return
        error = AbsentByChoice(self.name, absent_runs(entries, absent))
        if self._fetch is None:
            raise error
        self._fetch(self.name, error.wanted)
        still = self._absent(entries)
        if still:
            runs = ", ".join(run.describe() for run in absent_runs(entries, still))
            raise LocalError(ErrorCode.OBJECT_NOT_FOUND, f"{self.name}: {runs} still absent after fetching them")

    def _absent(self, entries: Sequence[SliceEntry]) -> set[Multihash]:
        """The slices of ``entries`` absent by choice (the recorded selection is read only when one has
        no file: a whole workspace pays a stat per slice; a short or long file is damage, ``path_of``'s)."""
        missing = files_absent(self._chain.dataset, (entry.ref for entry in entries))
        if not missing:
            return set()
        quarantined = {ref.physical_hash for ref in missing if self._quarantined(ref.physical_hash)}
        with sdk_errors():
            left_out = slices_left_out(self.workspace, self._chain.dataset, self._chain.tip)
        return {ref.physical_hash for ref in missing if ref.physical_hash in left_out} - quarantined

    def _quarantined(self, physical_hash: Multihash) -> bool:
        return any(self.workspace.quarantine.glob(f"{physical_hash}-*"))

    def path_of(self, entry: SliceEntry) -> Path:
        """Where a slice's file is; LocalError when it is missing, truncated or quarantined."""
        path = self.workspace.local_store.path_of(self._chain.dataset.object_key(entry.ref))
        try:
            size: int | None = path.stat().st_size
        except FileNotFoundError:
            size = None
        if size == entry.data.size:
            return path
        marked = self.workspace.lost.mark_quietly(self.name)  # the pull it asks for looks for what is lost
        if self._quarantined(entry.data.physical_hash):
            why = "was moved to quarantine by verify (it was corrupt)"
        else:
            why = "is missing from the workspace" if size is None else f"has {size} bytes instead of {entry.data.size}"
        raise LocalError(
            ErrorCode.OBJECT_NOT_FOUND,
            f"{self.name}: data slice {entry.data.physical_hash} (block {entry.sequence_number}, offsets "
            f"{entry.first_offset}-{entry.last_offset}) {why}; {_repair_advice(self.name, marked)}",
        )

    def compare(self, base: str | None = None, target: str | None = None) -> VersionComparison:
        """Compare versions ``base`` (default: block 0) and ``target`` (default: the head) of the dataset
        (``repo/compare.py``: ``diff``'s and the web view's comparison). A slice footer it reads (the
        schema at a version) that is absent by choice is fetched when this handle was given ``fetch`` and
        the comparison made again, else AbsentByChoice names it; a lost one is named with how to get it
        back. Raises VersionError for a version that is none, or names no block of the chain."""
        dataset = self._chain.dataset
        for _ in range(_FOOTERS_READ):
            try:
                return compare_versions(dataset, dataset.require_tip(), base, target)
            except ObjectNotFound as exc:
                entries = [entry for entry in self.slices() if dataset.object_key(entry.ref) == exc.key]
                if not entries:
                    raise  # not a slice: the store's own message
                self.require(entries)  # absent by choice: fetched, or AbsentByChoice naming it
                self.path_of(entries[0])  # lost: named, with how to get it back
        return compare_versions(dataset, dataset.require_tip(), base, target)

    # -- rows ------------------------------------------------------------------------------------

    def schema(self, selection: Selection) -> pa.Schema:
        """One schema for the selected slices (read from their footers only): theirs when they agree,
        else the columns of all with types widened."""
        self.require(selection.entries)
        schemas = [self._parquet(entry, pq.read_schema) for entry in selection.entries]
        try:
            return combined_schema(schemas)
        except ValueError as exc:
            raise LocalError(ErrorCode.INTERNAL, f"{self.name}: {exc}") from None

    def tables(self, selection: Selection, schema: pa.Schema) -> Iterator[pa.Table]:
        """The selected records slice by slice, in chain order, each as a table of ``schema``."""
        for entry in selection.entries:
            table = self._parquet(entry, partial(_read_rows, entry=entry, selection=selection))
            try:
                yield conform(table, schema)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
                raise LocalError(
                    ErrorCode.INTERNAL, f"{self.name}: slice of block {entry.sequence_number} does not fit: {exc}"
                ) from None

    def to_arrow(self, *, offsets: Range | None = None, blocks: Range | None = None) -> pa.Table:
        """The selected records as one pyarrow Table, in chain order."""
        selection = self.select(offsets=offsets, blocks=blocks)
        schema = self.schema(selection)
        tables = list(self.tables(selection, schema))
        return pa.concat_tables(tables) if tables else empty_table(schema)

    def to_pandas(self, *, offsets: Range | None = None, blocks: Range | None = None) -> pandas.DataFrame:
        """The selected records as a pandas DataFrame (needs pandas installed)."""
        try:
            import pandas  # noqa: F401 - only to say clearly that it is missing
        except ImportError:
            raise LocalError(ErrorCode.INVALID_REQUEST, "to_pandas needs pandas: pip install pandas") from None
        return self.to_arrow(offsets=offsets, blocks=blocks).to_pandas()

    def tail(self, count: int) -> pa.Table:
        """The last ``count`` records, oldest first (reads only the row groups that hold them)."""
        if count < 0:
            raise LocalError(ErrorCode.INVALID_REQUEST, "the number of records to show cannot be negative")
        if self.records == 0:
            return self.to_arrow()
        return last_records(self.to_arrow(offsets=(max(0, self.records - max(count, 1)), None)), count)

    def to_spark(self, spark: Any, *, offsets: Range | None = None, blocks: Range | None = None) -> Any:
        """The selected records as a Spark DataFrame read by Spark itself from the slice files (as
        ``file://`` URIs: on a cluster, keep the workspace on a filesystem every executor mounts).
        Rows are in no particular order; ``orderBy("offset")`` restores the dataset's order."""
        selection = self.select(offsets=offsets, blocks=blocks)
        self.require(selection.entries)
        paths = [self.path_of(entry).as_uri() for entry in selection.entries]
        if not paths:
            # pyspark (an optional extra) loads only for Spark reads
            from pyspark.sql.types import StructType

            return spark.createDataFrame([], StructType([]))
        frame = spark.read.option("mergeSchema", "true").parquet(*paths)
        if all(selection.whole(entry) for entry in selection.entries):
            return frame
        if OFFSET_COLUMN not in frame.columns:
            raise LocalError(
                ErrorCode.INVALID_REQUEST, f"{self.name}: its slices have no {OFFSET_COLUMN!r} column to select by"
            )
        return frame.where(frame[OFFSET_COLUMN].between(selection.first, selection.last))

    def _parquet(self, entry: SliceEntry, read: Any) -> Any:
        """``read(path)`` on a slice's file, with a clear error when it is not readable Parquet."""
        path = self.path_of(entry)
        try:
            return read(path)
        except (pa.ArrowException, OSError) as exc:
            raise LocalError(
                ErrorCode.INTERNAL,
                f"{self.name}: data slice {entry.data.physical_hash} (block {entry.sequence_number}) "
                f"is not readable as Parquet: {exc}",
            ) from None

    # -- lifetime --------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the workspace when this handle opened it (``open_dataset``)."""
        if self._owns_workspace:
            self.workspace.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_dataset(workspace: Path | str | None, name: str, *, fetch: FetchAbsent | None = None) -> LocalDataset:
    """Open dataset ``name`` of the workspace at ``workspace`` (None: the default one) for reading.
    The workspace's index is opened read-only, so this works while a pull or an ingest runs; close
    the handle (or use ``with``) when done. ``fetch``: how to fetch slices absent by choice on demand
    (e.g. a ``SyncClient``'s ``fetch``; see ``LocalDataset``); None, the default: such a read raises
    ``AbsentByChoice``."""
    with sdk_errors():
        opened = Workspace.open_existing(Path(workspace) if workspace else Workspace.default_root(), read_only=True)
    try:
        return LocalDataset(opened, name, owns_workspace=True, fetch=fetch)
    except BaseException:
        opened.close()
        raise


def _read_rows(path: Path, entry: SliceEntry, selection: Selection) -> pa.Table:
    """The selected records of one slice file (see repo.rows.read_rows)."""
    return read_rows(pq.ParquetFile(path), entry, selection.first, selection.last)


def _repair_advice(name: str, marked: bool) -> str:
    """How to get a lost slice back: a pull, once the loss is marked (see ``repo.lost``)."""
    if marked:
        return f"`smart-transfer pull {name}` fetches it again"
    return f"`smart-transfer verify {name}` (as the workspace's owner), then `pull {name}`, fetches it again"
