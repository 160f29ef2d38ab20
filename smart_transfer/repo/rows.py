"""Records of a committed chain read back from Parquet data slices: only the row groups whose ``offset``
statistics meet the wanted range are read. Shared by the workspace reader (files on disk) and the
server's preview (objects in its store, read by byte ranges with a bound on the bytes read), so
both show the same last records.

``tail_from_store`` is the store-level reader: the server's web view shows with it the rows that
``smart-transfer tail`` prints for the same dataset, without a workspace."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any

import numpy
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from smart_transfer.model import ChainTip
from smart_transfer.model.events import OFFSET_COLUMN
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.errors import RepositoryError
from smart_transfer.repo.slices import ChainSlices, SliceEntry


class ReadBudgetExceeded(RepositoryError):
    """Reading the wanted records would read more bytes from the store than allowed."""


def offset_spans(metadata: pq.FileMetaData, entry: SliceEntry) -> list[tuple[int, int]]:
    """Each row group's first and last offset: from the offset column's statistics, else (no such
    column) from the row positions; a group without statistics may hold any of the slice's offsets."""
    column = next((i for i in range(metadata.num_columns) if metadata.schema.column(i).path == OFFSET_COLUMN), None)
    spans, position = [], entry.first_offset
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        span = (position, position + group.num_rows - 1)
        if column is not None:
            stats = group.column(column).statistics
            has_range = stats is not None and stats.has_min_max
            span = (int(stats.min), int(stats.max)) if has_range else (entry.first_offset, entry.last_offset)
        spans.append(span)
        position += group.num_rows
    return spans


def row_groups(parquet: pq.ParquetFile, entry: SliceEntry, first: int, last: int) -> Iterator[pa.Table]:
    """The records ``first..last`` of one slice, a row group at a time (memory holds one group): only
    row groups that may hold them are read."""
    has_column = OFFSET_COLUMN in parquet.schema_arrow.names
    for index, (low, high) in enumerate(offset_spans(parquet.metadata, entry)):
        if high < first or low > last:
            continue
        group = parquet.read_row_group(index)
        if has_column:
            group = within(group, first, last)
        else:
            start = max(first, low) - low
            group = group.slice(start, min(last, high) - low - start + 1)
        yield group


def read_rows(parquet: pq.ParquetFile, entry: SliceEntry, first: int, last: int) -> pa.Table:
    """The records ``first..last`` of one slice: only row groups that may hold them are read."""
    if first <= entry.first_offset and entry.last_offset <= last:
        return parquet.read()
    parts = list(row_groups(parquet, entry, first, last))
    return pa.concat_tables(parts) if parts else empty_table(parquet.schema_arrow)


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table with no rows (not Schema.empty_table(), which would import pandas)."""
    return pa.Table.from_batches([], schema=schema)


def _integers(column: pa.ChunkedArray) -> numpy.ndarray[Any, Any] | None:
    """An integer column without nulls as one numpy array, read from its buffers (None for any other
    column). Not ``to_numpy()``: pyarrow then imports pandas when installed, 0.5 s of a 1 s ``tail``."""
    parts = []
    for chunk in column.chunks:
        if not pa.types.is_integer(chunk.type) or chunk.null_count:
            return None
        kind = "i" if pa.types.is_signed_integer(chunk.type) else "u"
        dtype = numpy.dtype(f"{kind}{chunk.type.bit_width // 8}")
        values = chunk.buffers()[1]
        parts.append(numpy.frombuffer(values, dtype=dtype, count=len(chunk), offset=chunk.offset * dtype.itemsize))
    return numpy.concatenate(parts) if parts else numpy.empty(0, numpy.int64)


def within(table: pa.Table, first: int, last: int) -> pa.Table:
    """The rows of ``table`` whose offset is within ``first..last``. Rows in offset order (as ingest
    writes them) are one slice of the table, cut without a compute kernel (pyarrow's import pandas);
    otherwise they are picked one by one."""
    column = table.column(OFFSET_COLUMN)
    offsets = _integers(column)
    if offsets is None:
        return table.filter(pc.and_(pc.greater_equal(column, first), pc.less_equal(column, last)))
    picked = numpy.flatnonzero((offsets >= first) & (offsets <= last))
    if len(picked) and picked[-1] - picked[0] + 1 == len(picked):
        return table.slice(int(picked[0]), len(picked))
    return table.take(pa.array(picked, pa.int64())) if len(picked) else table.slice(0, 0)


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with exactly ``schema``'s columns (missing ones null) and types."""
    if table.schema.equals(schema):
        return table
    names = set(table.column_names)
    columns = [
        table.column(field.name).cast(field.type) if field.name in names else pa.nulls(len(table), field.type)
        for field in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def combined_schema(schemas: list[pa.Schema]) -> pa.Schema:
    """One schema for several slices: theirs when they agree, else the columns of all with types
    widened (ValueError when they do not combine)."""
    if not schemas:
        return pa.schema([])
    if all(s.equals(schemas[0], check_metadata=True) for s in schemas):
        return schemas[0]
    try:
        return pa.unify_schemas([s.remove_metadata() for s in schemas], promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ValueError(f"the slices' schemas do not combine: {exc}") from None


def last_records(table: pa.Table, count: int) -> pa.Table:
    """The last ``count`` records of ``table`` in offset order (what ``tail`` shows)."""
    if OFFSET_COLUMN in table.column_names:
        table = table.sort_by(OFFSET_COLUMN)
    return table.slice(max(0, len(table) - count)) if count else table.slice(0, 0)


class StoreFile(io.RawIOBase):
    """A read-only, seekable file over one stored object, read by byte ranges (so Parquet reads only
    its footer and the row groups it needs), counting the bytes read against ``budget``."""

    def __init__(self, dataset: DatasetRepository, entry: SliceEntry, budget: ReadBudget) -> None:
        super().__init__()
        self._store = dataset.store
        self._key = dataset.object_key(entry.ref)
        self._size = entry.data.size
        self._position = 0
        self._budget = budget

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        wanted = min(len(view), self._size - self._position)
        if wanted <= 0:
            return 0
        self._budget.spend(wanted)
        filled = 0
        for chunk in self._store.stream(self._key, self._position, self._position + wanted - 1):
            view[filled : filled + len(chunk)] = chunk
            filled += len(chunk)
        self._position += filled
        return filled


class ReadBudget:
    """Bytes a read may take from the store, and how many it took."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.spent = 0

    def spend(self, count: int) -> None:
        if self.spent + count > self.limit:
            raise ReadBudgetExceeded(
                f"the records wanted lie in row groups larger than this page's bound of {self.limit} bytes"
            )
        self.spent += count


def tail_from_store(
    dataset: DatasetRepository, tip: ChainTip, count: int, budget: ReadBudget, on_read: Callable[[int], None]
) -> pa.Table:
    """The last ``count`` records of the chain ending at ``tip`` (the rows ``smart-transfer tail``
    prints), read from the dataset's store by byte ranges. Raises ReadBudgetExceeded past the
    budget; ``on_read`` is told the bytes read (also when it stops there)."""
    if tip.next_offset == 0:
        return pa.table({})
    first, last = max(0, tip.next_offset - max(count, 1)), tip.next_offset - 1
    try:
        parts: list[tuple[pq.ParquetFile, SliceEntry]] = [
            (pq.ParquetFile(StoreFile(dataset, entry, budget), pre_buffer=True), entry)
            for entry in ChainSlices(dataset, tip).for_offsets(first, last)
        ]
        schema = combined_schema([parquet.schema_arrow for parquet, _ in parts])
        tables = [conform(read_rows(parquet, entry, first, last), schema) for parquet, entry in parts]
    finally:
        on_read(budget.spent)
    table = pa.concat_tables(tables) if tables else empty_table(schema)
    return last_records(table, count)


def slice_rows_from_store(
    dataset: DatasetRepository,
    entry: SliceEntry,
    first: int,
    last: int,
    budget: ReadBudget,
    on_read: Callable[[int], None],
) -> pa.Table:
    """The records ``first..last`` of one slice (the rows ``export --offsets`` writes for them), read from
    the dataset's store by byte ranges: its footer and the row groups that hold them, within ``budget``
    (ReadBudgetExceeded past it); ``on_read`` is told the bytes read (also when it stops there)."""
    try:
        parquet = pq.ParquetFile(StoreFile(dataset, entry, budget), pre_buffer=True)
        return read_rows(parquet, entry, first, last)
    finally:
        on_read(budget.spent)
