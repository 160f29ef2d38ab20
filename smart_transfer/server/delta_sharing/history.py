"""A dataset's chain as a Delta Sharing table's history: a table version is a block's sequence number and
its timestamp the block's time; a table's files at version v are the data slices of the chain up to
block v; the changes between two versions are the slices the blocks between them added.

Kept compact, because a cached history lives as long as its head and a table may have 100,000 slices:
per version its time (8 bytes), per file its version, size, first offset, row count, running size and
hash (74 bytes), and the few recorded schemas, instead of decoded blocks (about 600 bytes a slice). A
``TableVersion`` is made again for the one file a streamed answer is writing."""

from __future__ import annotations

import bisect
import itertools
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import orjson

from smart_transfer.model import AddData, ChainTip, DataSlice, Multihash, SetDataSchema, decode_block
from smart_transfer.model.events import OffsetInterval
from smart_transfer.model.multihash import BINARY_LENGTH
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.server.delta_sharing.errors import invalid

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class TableVersion:
    """One block as a table version: its time, and the slice or schema it recorded if any."""

    version: int
    timestamp_ms: int
    data: DataSlice | None
    schema: SetDataSchema | None


def _millis(system_time: str) -> int:
    return int(datetime.fromisoformat(system_time).timestamp() * 1000)


def utc_text(timestamp_ms: int) -> str:
    """A time as the protocol writes it, for messages."""
    moment = EPOCH + timedelta(milliseconds=timestamp_ms)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Columns:
    """The history's arrays (``q``: 64-bit integers), one entry per version (``times``) or per file."""

    times: array[int] = field(default_factory=lambda: array("q"))
    file_versions: array[int] = field(default_factory=lambda: array("q"))
    sizes: array[int] = field(default_factory=lambda: array("q"))
    starts: array[int] = field(default_factory=lambda: array("q"))
    records: array[int] = field(default_factory=lambda: array("q"))
    #: ``running[i]``: the bytes of files ``0..i`` (a metaData line's size at any version, without a sum).
    running: array[int] = field(default_factory=lambda: array("q"))
    hashes: bytearray = field(default_factory=bytearray)
    schemas: list[tuple[int, SetDataSchema]] = field(default_factory=list)

    def copy(self) -> Columns:
        """A copy to extend (a history being streamed keeps its own)."""
        return Columns(
            array("q", self.times),
            array("q", self.file_versions),
            array("q", self.sizes),
            array("q", self.starts),
            array("q", self.records),
            array("q", self.running),
            bytearray(self.hashes),
            list(self.schemas),
        )

    def add(self, version: int, timestamp_ms: int, data: DataSlice | None, schema: SetDataSchema | None) -> None:
        self.times.append(timestamp_ms)
        if schema is not None:
            self.schemas.append((version, schema))
        if data is not None:
            start, count = data.offset_interval.start, data.num_records
            self.add_file(version, data.size, start, count, data.physical_hash.to_bytes())

    def add_file(self, version: int, size: int, start: int, records: int, digest: bytes) -> None:
        """A file version ``version`` added (its slice's size, first offset, row count and binary hash)."""
        self.file_versions.append(version)
        self.sizes.append(size)
        self.starts.append(start)
        self.records.append(records)
        self.running.append((self.running[-1] if self.running else 0) + size)
        self.hashes.extend(digest)


@dataclass(frozen=True)
class TableHistory:
    """A dataset's chain, up to one committed head, as table versions."""

    dataset: str
    table_id: str
    head: str
    columns: Columns

    @property
    def latest(self) -> int:
        return len(self.columns.times) - 1

    @property
    def is_table(self) -> bool:
        """A table has a known schema: recorded, or that of a slice."""
        return bool(self.columns.file_versions) or bool(self.columns.schemas)

    @property
    def versions(self) -> list[TableVersion]:
        """Every version, decoded again (for tests and small tables; answers stream ``files``)."""
        files = {self.columns.file_versions[i]: i for i in range(len(self.columns.file_versions))}
        schemas = dict(self.columns.schemas)
        return [
            TableVersion(v, t, self._slice(files[v]) if v in files else None, schemas.get(v))
            for v, t in enumerate(self.columns.times)
        ]

    def check_version(self, version: int, what: str = "version") -> int:
        if not 0 <= version <= self.latest:
            raise invalid(f"{what} {version} is not a version of {self.dataset} (0..{self.latest})")
        return version

    def version_at(self, timestamp_ms: int) -> int:
        """The latest version committed at or before the time (a snapshot's version, the end of changes):
        the latest for a time after it; 400 for a time before version 0, when the table did not exist."""
        found = [v for v, t in enumerate(self.columns.times) if t <= timestamp_ms]
        if not found:
            first = self.columns.times[0]
            raise invalid(
                f"{utc_text(timestamp_ms)} is before {self.dataset}'s first version (0, at {utc_text(first)})"
            )
        return found[-1]

    def version_from(self, timestamp_ms: int) -> int:
        """The first version committed at or after the time (a table version's ``startingTimestamp``, the
        start of changes): version 0 for a time before it; 400 for a time after the latest version."""
        for version, time in enumerate(self.columns.times):
            if time >= timestamp_ms:
                return version
        last = self.columns.times[-1]
        raise invalid(
            f"{utc_text(timestamp_ms)} is after {self.dataset}'s latest version ({self.latest}, at {utc_text(last)})"
        )

    def _file_range(self, first: int, last: int) -> range:
        """The indexes of the files versions ``first..last`` added."""
        versions = self.columns.file_versions
        return range(bisect.bisect_left(versions, first), bisect.bisect_right(versions, last))

    def _slice(self, index: int) -> DataSlice:
        columns = self.columns
        start, count = columns.starts[index], columns.records[index]
        digest = bytes(columns.hashes[index * BINARY_LENGTH : (index + 1) * BINARY_LENGTH])
        interval = OffsetInterval(start, start + count - 1)
        return DataSlice(Multihash.from_bytes(digest), columns.sizes[index], interval, count)

    def file_count(self, first: int, last: int) -> int:
        """How many files versions ``first..last`` added."""
        return len(self._file_range(first, last))

    def size_upto(self, version: int) -> int:
        """The bytes of the table's files at ``version``."""
        count = len(self._file_range(0, version))
        return self.columns.running[count - 1] if count else 0

    def files(self, first: int, last: int) -> Iterator[TableVersion]:
        """The versions ``first..last`` that added a slice, in chain order, made one at a time."""
        for index in self._file_range(first, last):
            version = self.columns.file_versions[index]
            yield TableVersion(version, self.columns.times[version], self._slice(index), None)

    def recorded_schema(self, version: int) -> SetDataSchema | None:
        """The schema in force at ``version`` (the latest recorded up to it, else the first recorded)."""
        recorded = self.columns.schemas
        before = [schema for at, schema in recorded if at <= version]
        return before[-1] if before else (recorded[0][1] if recorded else None)

    def first_slice(self) -> DataSlice | None:
        return self._slice(0) if self.columns.file_versions else None


def build_history(dataset: DatasetRepository, previous: TableHistory | None) -> TableHistory:
    """The dataset's history at its committed tip, decoding only the blocks after ``previous`` when the
    chain still holds its head (a push appended); else starting from the pieces the index keeps
    (``stored_pieces``: what a server before a restart built), and decoding only the blocks after them.
    The blocks are read in one streamed scan of the index (``blocks_after``), never all held at once; each
    piece completed here is kept in the index for the next start."""
    tip = dataset.require_tip()
    after, columns = None, Columns()
    if previous is not None:
        head = Multihash.parse(previous.head)
        if dataset.sequence_of(head) == previous.latest and previous.latest <= tip.sequence_number:
            after, columns = head, previous.columns.copy()
    if after is None:
        columns = stored_pieces(dataset, tip)
        after = dataset.hash_at(len(columns.times) - 1) if columns.times else None
    stored = len(columns.times) // PIECE_VERSIONS
    blocks = _blocks_after(dataset, tip, after)
    if blocks is None:  # rewritten since: read it all
        columns, blocks, stored = Columns(), dataset.blocks_after(tip, None), 0
    for _, data in blocks:
        block = decode_block(data)
        event = block.event
        slice_ = event.new_data if isinstance(event, AddData) else None
        schema = event if isinstance(event, SetDataSchema) else None
        columns.add(block.sequence_number, _millis(block.system_time), slice_, schema)
    _keep_pieces(dataset, columns, stored)
    return TableHistory(str(dataset.name), tip.dataset_id, str(tip.head), columns)


def _blocks_after(
    dataset: DatasetRepository, tip: ChainTip, after: Multihash | None
) -> Iterator[tuple[Multihash, bytes]] | None:
    """``blocks_after``, or None when ``after`` is no longer on the chain (its KeyError comes with the
    first block, so the first is read here)."""
    blocks = dataset.blocks_after(tip, after)
    try:
        first = next(blocks, None)
    except KeyError:
        return None
    return itertools.chain([first] if first is not None else [], blocks)


# -- the history kept in the server's index, in pieces, across restarts ------------------------------------

#: Versions a kept piece of a history covers: a piece is written once, when the chain first holds all of
#: its versions; a start reads every whole piece and decodes at most this many blocks after them.
PIECE_VERSIONS = 1024
#: The kind of the index's derived records the pieces are (its number changes with their form).
PIECE_KIND = "sharing-history-1"


def _piece_bytes(dataset: DatasetRepository, columns: Columns, number: int) -> bytes:
    """Piece ``number`` of ``columns``: its versions' times, the files they added, the versions that
    recorded a schema, and the hash of its last block (a start checks it against the chain)."""
    first, last = number * PIECE_VERSIONS, (number + 1) * PIECE_VERSIONS - 1
    files = range(bisect.bisect_left(columns.file_versions, first), bisect.bisect_right(columns.file_versions, last))
    piece = {
        "last": str(dataset.hash_at(last)),
        "times": columns.times[first : last + 1].tolist(),
        "files": [[columns.file_versions[i], columns.sizes[i], columns.starts[i], columns.records[i]] for i in files],
        "hashes": bytes(columns.hashes[files.start * BINARY_LENGTH : files.stop * BINARY_LENGTH]).hex(),
        "schemas": [version for version, _ in columns.schemas if first <= version <= last],
    }
    return orjson.dumps(piece)


def _keep_pieces(dataset: DatasetRepository, columns: Columns, stored: int) -> None:
    """Keep in the index the whole pieces of ``columns`` after the first ``stored`` (already kept)."""
    whole = len(columns.times) // PIECE_VERSIONS
    if whole > stored:
        dataset.record_derived(PIECE_KIND, ((n, _piece_bytes(dataset, columns, n)) for n in range(stored, whole)))


def _add_piece(dataset: DatasetRepository, columns: Columns, raw: bytes) -> None:
    """Append a kept piece to ``columns`` (its schema blocks are read again: a few, if any)."""
    piece = orjson.loads(raw)
    columns.times.extend(piece["times"])
    digests = bytes.fromhex(piece["hashes"])
    for index, (version, size, start, records) in enumerate(piece["files"]):
        columns.add_file(version, size, start, records, digests[index * BINARY_LENGTH : (index + 1) * BINARY_LENGTH])
    for version in piece["schemas"]:
        event = decode_block(dataset.block_bytes(dataset.hash_at(version))).event
        if isinstance(event, SetDataSchema):
            columns.schemas.append((version, event))


def stored_pieces(dataset: DatasetRepository, tip: ChainTip) -> Columns:
    """The history's first versions, from the pieces the index keeps that are still this chain's (a piece
    whose last block is no longer on the chain, and every one after it, are left out: they are built
    again)."""
    columns = Columns()
    whole = (tip.sequence_number + 1) // PIECE_VERSIONS
    for number, raw in enumerate(dataset.derived_records(PIECE_KIND, 0, whole - 1)):
        if raw is None:
            break
        try:
            if orjson.loads(raw)["last"] != str(dataset.hash_at((number + 1) * PIECE_VERSIONS - 1)):
                break
            _add_piece(dataset, columns, raw)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return Columns()  # a piece this server cannot read: build the history from the blocks
    return columns
