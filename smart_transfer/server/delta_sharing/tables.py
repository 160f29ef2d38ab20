"""Datasets as Delta Sharing tables: a table version is a block's sequence number and its timestamp the
block's time; a table's files at version v are the data slices of the chain up to block v; the changes
between two versions are the slices the blocks between them added. Read from one committed tip, so a
push during a request does not change its answer."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any

from smart_transfer.model import (
    AddData,
    DataSlice,
    InvalidDatasetName,
    Multihash,
    SetDataSchema,
    decode_block,
)
from smart_transfer.repo import Repository
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.footer import NotParquet, UnnamedType, slice_fields, slice_footer
from smart_transfer.repo.footer_stats import SliceStats, footer_stats
from smart_transfer.server.delta_sharing.errors import invalid, not_found
from smart_transfer.server.delta_sharing.naming import dataset_name, dataset_of_table
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


#: The protocol's timestamp: ISO 8601 in UTC (``2022-01-01T00:00:00Z``), or, as its first versions wrote
#: it, ``yyyy-[m]m-[d]d hh:mm:ss[.f...]``; a zone other than UTC is honoured, no zone is UTC.
TIMESTAMP = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:?\d{2})?",
    re.IGNORECASE | re.ASCII,
)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _zone(text: str | None) -> tzinfo:
    if text is None or text.upper() == "Z":
        return UTC
    hours, minutes = int(text[1:3]), int(text[-2:])
    if minutes >= 60:
        raise ValueError(text)
    sign = -1 if text[0] == "-" else 1
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def _utc(timestamp_ms: int) -> str:
    """A time as the protocol writes it, for messages."""
    moment = EPOCH + timedelta(milliseconds=timestamp_ms)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_timestamp(text: str) -> int:
    """A request's timestamp (``TIMESTAMP``) in ms since the epoch (400 INVALID_PARAMETER_VALUE when it
    is not one: a date alone, words, a day or hour that does not exist)."""
    match = TIMESTAMP.fullmatch(text.strip())
    try:
        if match is None:
            raise ValueError(text)
        year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
        micros = int((match[7] or "0")[:6].ljust(6, "0"))
        moment = datetime(year, month, day, hour, minute, second, micros, tzinfo=_zone(match[8]))
        moment = moment.astimezone(UTC)  # a UTC time too (for messages), or OverflowError
    except (ValueError, OverflowError):
        raise invalid(f"not a timestamp: {text[:100]!r} (e.g. 2026-01-31T12:00:00Z)") from None
    return (moment - EPOCH) // timedelta(milliseconds=1)  # exact: a float would round up to the next day


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
        """The latest version committed at or before the time (a snapshot's version, the end of changes):
        the latest for a time after it; 400 for a time before version 0, when the table did not exist."""
        found = [v.version for v in self.versions if v.timestamp_ms <= timestamp_ms]
        if not found:
            first = self.versions[0].timestamp_ms
            raise invalid(f"{_utc(timestamp_ms)} is before {self.dataset}'s first version (0, at {_utc(first)})")
        return found[-1]

    def version_from(self, timestamp_ms: int) -> int:
        """The first version committed at or after the time (a table version's ``startingTimestamp``, the
        start of changes): version 0 for a time before it; 400 for a time after the latest version."""
        for entry in self.versions:
            if entry.timestamp_ms >= timestamp_ms:
                return entry.version
        last = self.versions[-1].timestamp_ms
        raise invalid(f"{_utc(timestamp_ms)} is after {self.dataset}'s latest version ({self.latest}, at {_utc(last)})")

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
        """The history of dataset ``name`` at its current head (404 when it is no table: no head, no
        schema recorded and no slice, a first slice that is not Parquet, a type Spark's JSON cannot name)."""
        cached = self._current(name)
        if cached is None:
            raise not_found(f"no table for dataset {name}")
        return self._as_table(cached)

    def table(self, table: str, may_read: Callable[[str], bool]) -> TableHistory | None:
        """The history of the table a reader names (``naming.dataset_of_table`` over the datasets it
        may read), or None when the name matches none of them. The dataset spelled so is tried first, so
        a name as listed costs no listing of the store."""
        spelled = dataset_name(table)
        found = self._current(spelled) if may_read(spelled) else None
        if found is None:
            match = dataset_of_table(table, (name for name in self.dataset_names() if may_read(name)))
            found = self._current(match) if match is not None else None
        return self._as_table(found) if found is not None else None

    def _current(self, name: str) -> TableHistory | None:
        """The dataset's history at its current head (None: no such dataset, or no valid name)."""
        try:
            dataset = self.repository.dataset(name)
        except InvalidDatasetName:
            return None
        head = dataset.head()
        if head is None:
            return None
        with self._lock:
            cached = self._histories.get(name)
        if cached is None or cached.head != str(head):
            cached = _history(dataset, cached)
            with self._lock:
                self._histories[name] = cached
                self._histories.move_to_end(name)
                while len(self._histories) > MAX_CACHED_TABLES:
                    self._histories.popitem(last=False)
        return cached

    def _as_table(self, history: TableHistory) -> TableHistory:
        if not history.is_table:
            raise not_found(f"dataset {history.dataset} has neither a schema nor data yet")
        self.schema(history, history.latest)  # or 404: no schema Delta Sharing can name
        return history

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
