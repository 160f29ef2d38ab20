"""The tables of a repository (its datasets, as ``history.py`` reads them), each read from one committed
tip, so a push during a request does not change its answer; their schemas; and the files' statistics,
read once per slice from its Parquet footer and then recorded in the server's index by the slice's
hash, so neither a later query nor a restarted server reads that footer again."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from smart_transfer.config.values import BadValue, moment
from smart_transfer.model import DataSlice, InvalidDatasetName
from smart_transfer.repo import Repository
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.footer import NotParquet, UnnamedType, slice_fields, slice_footer
from smart_transfer.repo.footer_stats import STATS_FORMAT, SliceStats, footer_stats, stats_from_bytes, stats_to_bytes
from smart_transfer.server.delta_sharing.errors import SharingError, invalid, not_found
from smart_transfer.server.delta_sharing.history import EPOCH, TableHistory, TableVersion, build_history
from smart_transfer.server.delta_sharing.naming import dataset_name, dataset_of_table
from smart_transfer.server.delta_sharing.spark_schema import UnsupportedSchema, schema_of_fields
from smart_transfer.server.metrics import Metrics

__all__ = ["TableHistory", "TableVersion", "Tables", "parse_timestamp"]

#: Histories (one per dataset, for its current head), slice schemas and slice statistics kept in memory
#: (statistics: a few hundred bytes per slice; beyond these, the index's records are read).
MAX_CACHED_TABLES = 256
MAX_CACHED_FOOTERS = 1024
MAX_CACHED_STATS = 20_000
#: A table listing tells whether a dataset is a table (and its id) from its head as last read when that read
#: is this recent (seconds) and this server has committed nothing to it since, without reading its head
#: again: a listing of N datasets on S3 is otherwise N round trips each time (under load, most of the
#: server's store calls), and what a listing shows (name, id, being a table) moves only when a dataset is
#: made, gets its first schema or data, or is removed. A dataset found to be no table is remembered the
#: same way, else every listing would read every dataset of objects again. So a change committed through
#: this server shows at once, one committed through another replica within this many seconds. The names
#: themselves are listed afresh every time; queries always read the head.
LISTED_HEAD_MAX_AGE = 2.0
#: Footers read in parallel when a query meets slices whose statistics are not recorded yet (a footer
#: read on S3 is two round trips: the latency of a remote store, not CPU, is what the parallel reads hide).
FOOTER_READS_AT_ONCE = 16


#: The moments a request's timestamp may name (those its answers can write back).
FIRST_MOMENT, LAST_MOMENT = datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


def parse_timestamp(text: str, up: bool = False) -> int:
    """A request's timestamp in ms since the epoch, rounded down (or ``up``: see ``Moment.millis``). The
    protocol's timestamp is ISO 8601 (``2022-01-01T00:00:00Z``), or, as its first versions wrote it,
    ``yyyy-[m]m-[d]d hh:mm:ss[.f...]``; a zone other than UTC is honoured, no zone is UTC; read by the one
    rule (``config/values.py``). 400 INVALID_PARAMETER_VALUE when it is not one (a date alone, words, a day
    or hour that does not exist, a moment outside years 1 to 9999)."""
    try:
        found = moment(text, "a timestamp", seconds=True)
    except BadValue:
        found = None
    first, last = ((edge - EPOCH) // timedelta(microseconds=1) * 1000 for edge in (FIRST_MOMENT, LAST_MOMENT))
    if found is None or not first <= found.nanos <= last:
        raise invalid(f"not a timestamp: {text[:100]!r} (e.g. 2026-01-31T12:00:00Z)")
    return found.millis(up)


@dataclass(frozen=True)
class _Listed:
    """What a listing found for one dataset: its history when it is a table (None: no table), when its head
    was read, and the head this server's index named just before."""

    history: TableHistory | None
    read_at: float
    indexed: str | None


class Tables:
    """The tables of one repository, with their histories and schemas cached (bounded, LRU)."""

    def __init__(self, repository: Repository, metrics: Metrics | None = None) -> None:
        self.repository = repository
        self.metrics = metrics
        self._histories: OrderedDict[str, TableHistory] = OrderedDict()
        #: A slice's schema, or why it has none (by physical hash: the same bytes, the same answer).
        self._footers: OrderedDict[str, dict[str, Any] | str] = OrderedDict()
        #: A slice's statistics, by physical hash.
        self._stats: OrderedDict[str, SliceStats] = OrderedDict()
        #: What a listing found lately for each dataset (see LISTED_HEAD_MAX_AGE).
        self._listed: OrderedDict[str, _Listed] = OrderedDict()
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

    def listed(self, name: str) -> TableHistory:
        """The history a table listing shows for dataset ``name`` (404 when it is no table), as read within
        LISTED_HEAD_MAX_AGE seconds when this server's index still names the head it had then (see there),
        else ``history`` read afresh."""
        now = time.monotonic()
        indexed = self._indexed_head(name)
        with self._lock:
            recent = self._listed.get(name)
        if recent is None or now - recent.read_at >= LISTED_HEAD_MAX_AGE or recent.indexed != indexed:
            # the index's head as it was before the read: a commit here during the read makes the next
            # listing read again (after the read, the head the history came from would be unknown)
            try:
                recent = _Listed(self.history(name), now, indexed)
            except SharingError as exc:
                if exc.status != 404:
                    raise
                recent = _Listed(None, now, indexed)
            with self._lock:
                self._listed[name] = recent
                self._listed.move_to_end(name)
                while len(self._listed) > MAX_CACHED_TABLES:
                    self._listed.popitem(last=False)
        if recent.history is None:
            raise not_found(f"no table for dataset {name}")
        return recent.history

    def _indexed_head(self, name: str) -> str | None:
        """The head this server's index names for dataset ``name`` (no store call; None when none)."""
        try:
            tip = self.repository.dataset(name).indexed_tip()
        except InvalidDatasetName:
            return None
        return str(tip.head) if tip is not None else None

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
            cached = build_history(dataset, cached)
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

    def stats(self, history: TableHistory, pieces: Sequence[DataSlice]) -> list[SliceStats]:
        """Each slice's statistics: kept in memory, else recorded in the index, else read from its footer
        (two ranged reads), FOOTER_READS_AT_ONCE slices at a time, and recorded. A slice that is not
        Parquet has its chain's row count and no column bounds (kept in memory only: the count is the
        chain's, not the content's)."""
        keys = [str(p.physical_hash) for p in pieces]
        with self._lock:
            known = {key: self._stats[key] for key in keys if key in self._stats}
        unknown = {key: piece for key, piece in zip(keys, pieces, strict=True) if key not in known}
        if unknown:
            found = self._recorded(list(unknown))
            missing = [piece for key, piece in unknown.items() if key not in found]
            if missing:
                found.update(self._read_footers(history, missing))
            self._remember(found)
            known.update(found)
        return [known[key] for key in keys]

    def _recorded(self, keys: list[str]) -> dict[str, SliceStats]:
        """The statistics the index records for ``keys`` (one multi-get)."""
        recorded = self.repository.slice_stats(STATS_FORMAT, keys)
        return {key: stats_from_bytes(raw) for key, raw in zip(keys, recorded, strict=True) if raw is not None}

    def _read_footers(self, history: TableHistory, missing: list[DataSlice]) -> dict[str, SliceStats]:
        dataset = self.repository.dataset(history.dataset)
        with ThreadPoolExecutor(min(FOOTER_READS_AT_ONCE, len(missing))) as pool:
            read = list(pool.map(lambda piece: _slice_stats(dataset, piece), missing))
        if self.metrics is not None:
            self.metrics.sharing_footer_reads.inc(len(missing))
        found = {str(piece.physical_hash): stats for piece, (stats, _) in zip(missing, read, strict=True)}
        parquet = [
            (key, stats_to_bytes(stats)) for (key, stats), (_, ok) in zip(found.items(), read, strict=True) if ok
        ]
        self.repository.record_slice_stats(STATS_FORMAT, parquet)
        return found

    def _remember(self, found: dict[str, SliceStats]) -> None:
        with self._lock:
            for key, stats in found.items():
                self._stats[key] = stats
                self._stats.move_to_end(key)
            while len(self._stats) > MAX_CACHED_STATS:
                self._stats.popitem(last=False)


def _slice_stats(dataset: DatasetRepository, piece: DataSlice) -> tuple[SliceStats, bool]:
    """The slice's statistics, and whether they are its footer's (False: not Parquet)."""
    try:
        return footer_stats(slice_footer(dataset, piece)), True
    except NotParquet:
        return SliceStats(piece.num_records, {}), False
