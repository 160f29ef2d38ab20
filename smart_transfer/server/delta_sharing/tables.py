"""Datasets as Delta Sharing tables: a table version is a block's sequence number and its timestamp the
block's time; a table's files at version v are the data slices of the chain up to block v; the changes
between two versions are the slices the blocks between them added. Read from one committed tip, so a
push during a request does not change its answer."""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from smart_transfer.model import AddData, DataSlice, Multihash, SetDataSchema, decode_block
from smart_transfer.repo import Repository
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.footer import NotParquet, UnnamedType, slice_fields, slice_footer
from smart_transfer.repo.footer_stats import SliceStats, footer_stats
from smart_transfer.server.delta_sharing.errors import invalid, not_found
from smart_transfer.server.delta_sharing.spark_schema import UnsupportedSchema, schema_of_fields

#: Histories (one per dataset, for its current head), slice schemas and slice statistics kept in memory
#: (statistics: a few hundred bytes per slice, read once from its footer, by its hash).
MAX_CACHED_TABLES = 256
MAX_CACHED_FOOTERS = 1024
MAX_CACHED_STATS = 20_000
#: Footers read in parallel when a query meets slices whose statistics are not cached yet (a footer read
#: on S3 is two round trips: the latency of a remote store, not CPU, is what the parallel reads hide).
FOOTER_READS_AT_ONCE = 16


@dataclass(frozen=True, slots=True)
class TableVersion:
    """One block as a table version: its time, and the slice or schema it recorded if any."""

    version: int
    timestamp_ms: int
    data: DataSlice | None
    schema: SetDataSchema | None


def _millis(system_time: str) -> int:
    return int(datetime.fromisoformat(system_time).timestamp() * 1000)


def parse_timestamp(text: str) -> int:
    """A request's timestamp (ISO 8601 / RFC 3339, or ``yyyy-mm-dd hh:mm:ss[.f]``; no zone: UTC) in ms."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise invalid(f"not a timestamp: {text[:100]!r} (e.g. 2026-01-31T12:00:00Z)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


@dataclass(frozen=True)
class TableHistory:
    """A dataset's chain, up to one committed head, as table versions."""

    dataset: str
    table_id: str
    head: str
    versions: tuple[TableVersion, ...]

    @property
    def latest(self) -> int:
        return len(self.versions) - 1

    @property
    def is_table(self) -> bool:
        """A table has a known schema: recorded, or that of a slice."""
        return any(v.data is not None or v.schema is not None for v in self.versions)

    def check_version(self, version: int, what: str = "version") -> int:
        if not 0 <= version <= self.latest:
            raise invalid(f"{what} {version} is not a version of {self.dataset} (0..{self.latest})")
        return version

    def version_at(self, timestamp_ms: int) -> int:
        """The latest version committed at or before the time (a snapshot's version)."""
        found = [v.version for v in self.versions if v.timestamp_ms <= timestamp_ms]
        if not found:
            raise invalid(f"{self.dataset} has no version at or before that time")
        return found[-1]

    def version_from(self, timestamp_ms: int) -> int:
        """The first version committed at or after the time (where changes start)."""
        for entry in self.versions:
            if entry.timestamp_ms >= timestamp_ms:
                return entry.version
        raise invalid(f"{self.dataset} has no version at or after that time (latest: {self.latest})")

    def files(self, first: int, last: int) -> list[TableVersion]:
        """The versions ``first..last`` that added a slice, in chain order."""
        return [v for v in self.versions[first : last + 1] if v.data is not None]

    def recorded_schema(self, version: int) -> SetDataSchema | None:
        """The schema in force at ``version`` (the latest recorded up to it, else the first recorded)."""
        recorded = [v.schema for v in self.versions if v.schema is not None]
        before = [v.schema for v in self.versions[: version + 1] if v.schema is not None]
        return before[-1] if before else (recorded[0] if recorded else None)

    def first_slice(self) -> DataSlice | None:
        return next((v.data for v in self.versions if v.data is not None), None)


def _history(dataset: DatasetRepository, previous: TableHistory | None) -> TableHistory:
    """The dataset's history at its committed tip, decoding only the blocks after ``previous`` when the
    chain still holds its head (a push appended), every block otherwise (a new dataset, a rewrite)."""
    tip = dataset.require_tip()
    after, versions = None, []
    if previous is not None:
        head = Multihash.parse(previous.head)
        if dataset.sequence_of(head) == previous.latest and previous.latest <= tip.sequence_number:
            after, versions = head, list(previous.versions)
    try:
        blocks = list(dataset.blocks_after(tip, after))
    except KeyError:  # rewritten since: read it all
        blocks, versions = list(dataset.blocks_after(tip, None)), []
    for _, data in blocks:
        block = decode_block(data)
        event = block.event
        slice_ = event.new_data if isinstance(event, AddData) else None
        schema = event if isinstance(event, SetDataSchema) else None
        versions.append(TableVersion(block.sequence_number, _millis(block.system_time), slice_, schema))
    return TableHistory(str(dataset.name), tip.dataset_id, str(tip.head), tuple(versions))


class Tables:
    """The tables of one repository, with their histories and schemas cached (bounded, LRU)."""

    def __init__(self, repository: Repository) -> None:
        self.repository = repository
        self._histories: OrderedDict[str, TableHistory] = OrderedDict()
        #: A slice's schema, or why it has none (by physical hash: the same bytes, the same answer).
        self._footers: OrderedDict[str, dict[str, Any] | str] = OrderedDict()
        #: A slice's statistics, by physical hash.
        self._stats: OrderedDict[str, SliceStats] = OrderedDict()
        self._lock = threading.Lock()

    def dataset_names(self) -> list[str]:
        return [str(name) for name in self.repository.dataset_names()]

    def history(self, name: str) -> TableHistory:
        """The history of dataset ``name`` at its current head (404 when it is no table: no schema
        recorded and no slice, a first slice that is not Parquet, a type Spark's JSON cannot name)."""
        dataset = self.repository.dataset(name)
        head = dataset.head()
        if head is None:
            raise not_found(f"no table for dataset {name}")
        with self._lock:
            cached = self._histories.get(name)
        if cached is None or cached.head != str(head):
            cached = _history(dataset, cached)
            with self._lock:
                self._histories[name] = cached
                self._histories.move_to_end(name)
                while len(self._histories) > MAX_CACHED_TABLES:
                    self._histories.popitem(last=False)
        if not cached.is_table:
            raise not_found(f"dataset {name} has neither a schema nor data yet")
        self.schema(cached, cached.latest)  # or 404: no schema Delta Sharing can name
        return cached

    def schema(self, history: TableHistory, version: int) -> dict[str, Any]:
        """The StructType of the table at ``version``: recorded, else the first slice's footer (404 when
        the slice is not Parquet or a type has no Spark JSON name)."""
        try:
            recorded = history.recorded_schema(version)
            if recorded is not None:
                return schema_of_fields(recorded.fields)
            return self._footer_schema(history)
        except (NotParquet, UnsupportedSchema) as exc:
            raise not_found(f"dataset {history.dataset} is not a table: {exc}") from None

    def _footer_schema(self, history: TableHistory) -> dict[str, Any]:
        first = history.first_slice()
        assert first is not None  # a table has a recorded schema or a slice
        key = str(first.physical_hash)
        with self._lock:
            cached = self._footers.get(key)
        if cached is None:
            dataset = self.repository.dataset(history.dataset)
            try:
                cached = schema_of_fields(slice_fields(dataset, first))
            except (NotParquet, UnnamedType, UnsupportedSchema) as exc:
                cached = str(exc)  # remembered too: listings do not read a non-Parquet slice again
            with self._lock:
                self._footers[key] = cached
                while len(self._footers) > MAX_CACHED_FOOTERS:
                    self._footers.popitem(last=False)
        if isinstance(cached, str):
            raise NotParquet(cached)
        return cached

    def stats(self, history: TableHistory, entries: list[TableVersion]) -> list[SliceStats]:
        """Each file's statistics: from its footer (two ranged reads) the first time, FOOTER_READS_AT_ONCE
        slices at a time, then by its hash; a slice that is not Parquet has its chain's row count and no
        column bounds."""
        pieces = [entry.data for entry in entries if entry.data is not None]
        with self._lock:
            known = {
                str(p.physical_hash): self._stats[str(p.physical_hash)]
                for p in pieces
                if str(p.physical_hash) in self._stats
            }
        missing = list({str(p.physical_hash): p for p in pieces if str(p.physical_hash) not in known}.values())
        if missing:
            dataset = self.repository.dataset(history.dataset)
            with ThreadPoolExecutor(min(FOOTER_READS_AT_ONCE, len(missing))) as pool:
                read = list(pool.map(lambda piece: _slice_stats(dataset, piece), missing))
            with self._lock:
                for piece, stats in zip(missing, read, strict=True):
                    known[str(piece.physical_hash)] = self._stats[str(piece.physical_hash)] = stats
                while len(self._stats) > MAX_CACHED_STATS:
                    self._stats.popitem(last=False)
        return [known[str(piece.physical_hash)] for piece in pieces]


def _slice_stats(dataset: DatasetRepository, piece: DataSlice) -> SliceStats:
    try:
        return footer_stats(slice_footer(dataset, piece))
    except NotParquet:
        return SliceStats(piece.num_records, {})
