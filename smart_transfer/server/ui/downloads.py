"""The web view's downloads (blocking parts: call from a thread). A data slice as Parquet is a redirect to
a short-lived presigned URL made by the server's one signer (server/signer.py), so its bytes go from the
store to the browser, never through the server. A block's records, or the last N records, as CSV are
read from the store a row group at a time (memory holds one row group and its CSV text) and written by
``export``'s own writer (reading/export.py: the CSV ``export --format csv`` writes for the same rows)."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from smart_transfer.errors import LocalError
from smart_transfer.model import AddData, InvalidMultihash, Multihash, ObjectKind, ObjectRef, decode_block
from smart_transfer.reading.export import TableWriter
from smart_transfer.repo.compare import VersionError, resolve_version
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.rows import ReadBudget, StoreFile, combined_schema, conform, row_groups
from smart_transfer.repo.slices import ChainSlices, SliceEntry
from smart_transfer.server.signer import Signer, committed_size
from smart_transfer.server.ui.pages import PageError, whole_number

#: Records the last-records CSV holds unless ``?last=`` says otherwise.
LAST_ROWS_DEFAULT = 1000
#: The counts ``?last=`` may ask for.
LAST_ROWS_RANGE = (1, 1_000_000)
#: The CSV's media type (``export --format csv`` writes UTF-8).
CSV_MEDIA_TYPE = "text/csv; charset=utf-8"
#: Longest text of a bad slice hash quoted back.
MAX_QUOTED = 80


def slice_url(signer: Signer, repo: DatasetRepository, text: str, ttl: int) -> str:
    """A presigned GET URL, living ``ttl`` seconds, of the committed data slice ``text`` names (a
    PageError 400 for text that is no hash; ObjectNotFound, a 404, for a hash the dataset has no slice of)."""
    try:
        wanted = Multihash.parse(text)
    except InvalidMultihash:
        raise PageError(400, f"not a slice hash: {text[:MAX_QUOTED]!r} (a data slice's full hash)") from None
    size = committed_size(repo, ObjectKind.DATA, wanted)
    return signer.get(repo, ObjectRef(ObjectKind.DATA, wanted, size), ttl).url


def last_count(text: str | None) -> int:
    """The ``?last=`` count of records (PageError 400 outside LAST_ROWS_RANGE)."""
    return whole_number(text, "last", LAST_ROWS_DEFAULT, LAST_ROWS_RANGE)


def _taken(buffer: io.BytesIO) -> bytes:
    """What the CSV writer wrote into ``buffer`` since the last take (the buffer is emptied)."""
    written = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return written


@dataclass
class CsvDownload:
    """Records ``first..last`` of some slices, opened (their footers read) and ready to stream as CSV."""

    filename: str
    first: int
    last: int
    parts: list[tuple[pq.ParquetFile, SliceEntry]]
    schema: pa.Schema
    budget: ReadBudget
    drain: io.BytesIO
    writer: TableWriter
    counted: int = 0

    def chunks(self, on_read: Callable[[int], None]) -> Iterator[bytes]:
        """The CSV, a row group at a time; ``on_read`` is told the bytes read from the store."""
        writer = self.writer
        try:
            for parquet, entry in self.parts:
                for group in row_groups(parquet, entry, self.first, self.last):
                    writer.write(conform(group, self.schema))
                    self._count(on_read)
                    yield _taken(self.drain)
            writer.close()
            yield _taken(self.drain)
        finally:
            self._count(on_read)

    def _count(self, on_read: Callable[[int], None]) -> None:
        if self.budget.spent > self.counted:
            on_read(self.budget.spent - self.counted)
            self.counted = self.budget.spent


def _opened(repo: DatasetRepository, entries: list[SliceEntry], span: tuple[int, int], filename: str) -> CsvDownload:
    """The slices' footers read and their schemas combined as ``export`` does; the CSV writer's refusal
    (nested columns) is a PageError before a byte is sent."""
    # a slice's footer and row groups are each read once: the budget only stops a reader gone wrong
    budget = ReadBudget(2 * sum(entry.data.size for entry in entries))
    try:
        parts = [(pq.ParquetFile(StoreFile(repo, entry, budget), pre_buffer=True), entry) for entry in entries]
        schema = combined_schema([parquet.schema_arrow for parquet, _ in parts])
        drain = io.BytesIO()
        writer = TableWriter(drain, "csv", schema)
    except LocalError as exc:
        raise PageError(400, str(exc)) from None
    except (pa.ArrowException, ValueError) as exc:
        raise PageError(409, f"the records cannot be read as one table: {exc}") from None
    return CsvDownload(filename, span[0], span[1], parts, schema, budget, drain, writer)


def block_csv(repo: DatasetRepository, ref: str) -> CsvDownload:
    """The records of the slice block ``ref`` (a sequence number or hash) added: ``export --blocks K-K``'s."""
    tip = repo.require_tip()
    try:
        seq = resolve_version(repo, tip, ref)
    except VersionError as exc:
        raise PageError(exc.status, str(exc)) from None
    block_hash = repo.hash_at(seq)
    event = decode_block(repo.block_bytes(block_hash)).event
    if not isinstance(event, AddData) or event.new_data is None:
        raise PageError(404, f"block {seq} of {repo.name} adds no data slice ({type(event).__name__})")
    entry = SliceEntry(seq, block_hash, event.new_data)
    return _opened(repo, [entry], (entry.first_offset, entry.last_offset), f"{repo.name}-block-{seq}.csv")


def last_csv(repo: DatasetRepository, count: int) -> CsvDownload:
    """The last ``count`` records (fewer when the dataset holds fewer): ``export --offsets A-B``'s."""
    tip = repo.require_tip()
    if tip.next_offset == 0:
        raise PageError(404, f"{repo.name} has no records yet")
    first, last = max(0, tip.next_offset - count), tip.next_offset - 1
    entries = ChainSlices(repo, tip).for_offsets(first, last)
    return _opened(repo, entries, (first, last), f"{repo.name}-offsets-{first}-{last}.csv")
