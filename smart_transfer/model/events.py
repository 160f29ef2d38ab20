"""Metadata events: what a block records. Plain frozen classes with exact dict forms."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from msgspec import Struct

from smart_transfer.model.errors import InvalidBlock
from smart_transfer.model.fields import get_hash, get_int, get_object, get_str, require_keys
from smart_transfer.model.multihash import Multihash

DATASET_ID_PATTERN = r"did:odf:f[0-9a-f]{8,128}"
TIMESTAMP_PATTERN = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?Z"
_DATASET_ID = re.compile(DATASET_ID_PATTERN)
_TIMESTAMP = re.compile(TIMESTAMP_PATTERN)
DATASET_KINDS = ("root", "derivative")
MAX_KEYWORDS = 64
MAX_TEXT = 4096
#: Columns of a data schema (the block holding it must still fit MAX_BLOCK_BYTES).
MAX_FIELDS = 1000
MAX_FIELD_NAME = 256


def check_timestamp(value: str, where: str) -> str:
    """RFC 3339 UTC timestamps as text: times never travel as floats."""
    if _TIMESTAMP.fullmatch(value) is None:
        raise InvalidBlock(f"{where}: expected an RFC 3339 UTC timestamp like 2024-01-31T12:00:00Z, got {value!r}")
    return value


class OffsetInterval(Struct, frozen=True):
    """Inclusive range of record offsets."""

    start: int
    end: int

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end}

    @classmethod
    def from_dict(cls, obj: dict[str, Any], where: str) -> OffsetInterval:
        require_keys(obj, where, {"start", "end"})
        start, end = get_int(obj, "start", where), get_int(obj, "end", where)
        if end < start:
            raise InvalidBlock(f"{where}: end {end} is before start {start}")
        return cls(start, end)


#: The column of a data slice holding each record's offset (ingest writes it first, as BIGINT NOT
#: NULL); readers select and order by it. A slice without it is read as if its rows held the offsets
#: of its interval in file order.
OFFSET_COLUMN = "offset"


class DataSlice(Struct, frozen=True):
    """A data object (typically Parquet) with the records it holds."""

    physical_hash: Multihash
    size: int
    offset_interval: OffsetInterval
    num_records: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "physical_hash": str(self.physical_hash),
            "size": self.size,
            "offset_interval": self.offset_interval.to_dict(),
            "num_records": self.num_records,
        }

    @classmethod
    def from_dict(cls, obj: dict[str, Any], where: str) -> DataSlice:
        require_keys(obj, where, {"physical_hash", "size", "offset_interval", "num_records"})
        interval = OffsetInterval.from_dict(get_object(obj, "offset_interval", where), f"{where}.offset_interval")
        num_records = get_int(obj, "num_records", where, minimum=1)
        if num_records != interval.end - interval.start + 1:
            raise InvalidBlock(f"{where}: num_records {num_records} does not match the offset interval")
        return cls(get_hash(obj, "physical_hash", where), get_int(obj, "size", where), interval, num_records)


class Checkpoint(Struct, frozen=True):
    """A checkpoint object (a manifest of engine state files)."""

    physical_hash: Multihash
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {"physical_hash": str(self.physical_hash), "size": self.size}

    @classmethod
    def from_dict(cls, obj: dict[str, Any], where: str) -> Checkpoint:
        require_keys(obj, where, {"physical_hash", "size"})
        return cls(get_hash(obj, "physical_hash", where), get_int(obj, "size", where))


class Seed(Struct, frozen=True):
    """The first block of every dataset: its identity and kind."""

    dataset_id: str
    kind: Literal["root", "derivative"] = "root"
    TYPE: ClassVar[str] = "Seed"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.TYPE, "dataset_id": self.dataset_id, "kind": self.kind}

    @classmethod
    def from_dict(cls, obj: dict[str, Any], where: str) -> Seed:
        require_keys(obj, where, {"type", "dataset_id", "kind"})
        dataset_id = get_str(obj, "dataset_id", where)
        if _DATASET_ID.fullmatch(dataset_id) is None:
            raise InvalidBlock(f"{where}.dataset_id: expected 'did:odf:f' + hex, got {dataset_id[:80]!r}")
        kind = get_str(obj, "kind", where)
        if kind == "root":
            return cls(dataset_id, "root")
        if kind == "derivative":
            return cls(dataset_id, "derivative")
        raise InvalidBlock(f"{where}.kind: expected one of {', '.join(DATASET_KINDS)}, got {kind[:40]!r}")


class AddData(Struct, frozen=True):
    """New records, a new checkpoint and/or a new watermark."""

    new_data: DataSlice | None = None
    new_checkpoint: Checkpoint | None = None
    new_watermark: str | None = None
    TYPE: ClassVar[str] = "AddData"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.TYPE}
        if self.new_data is not None:
            out["new_data"] = self.new_data.to_dict()
        if self.new_checkpoint is not None:
            out["new_checkpoint"] = self.new_checkpoint.to_dict()
        if self.new_watermark is not None:
            out["new_watermark"] = self.new_watermark
        return out

    @classmethod
    def from_dict(cls, obj: dict[str, Any], where: str) -> AddData:
        require_keys(obj, where, {"type"}, frozenset({"new_data", "new_checkpoint", "new_watermark"}))
        data = obj.get("new_data")
        checkpoint = obj.get("new_checkpoint")
        watermark = obj.get("new_watermark")
        return cls(
            DataSlice.from_dict(get_object(obj, "new_data", where), f"{where}.new_data") if data is not None else None,
            Checkpoint.from_dict(get_object(obj, "new_checkpoint", where), f"{where}.new_checkpoint")
            if checkpoint is not None
            else None,
            check_timestamp(get_str(obj, "new_watermark", where), f"{where}.new_watermark")
            if watermark is not None
            else None,
        )


class SetInfo(Struct, frozen=True):
    """Human-facing description of the dataset."""

    description: str = ""
    keywords: tuple[str, ...] = ()
    TYPE: ClassVar[str] = "SetInfo"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.TYPE, "description": self.description, "keywords": list(self.keywords)}

    @classmethod
    def from_dict(cls, obj: dict[str, Any], where: str) -> SetInfo:
        require_keys(obj, where, {"type", "description", "keywords"})
        description = get_str(obj, "description", where)
        keywords = obj["keywords"]
        if not isinstance(keywords, list) or not all(isinstance(k, str) for k in keywords):
            raise InvalidBlock(f"{where}.keywords: expected a list of text")
        if len(description) > MAX_TEXT or len(keywords) > MAX_KEYWORDS or any(len(k) > 256 for k in keywords):
            raise InvalidBlock(f"{where}: description or keywords too long")
        return cls(description, tuple(keywords))


class DataField(Struct, frozen=True):
    """One column of a dataset's data slices: its name, its SQL type as Spark writes it in DDL
    (``BIGINT``, ``DECIMAL(10,2)``, ``TIMESTAMP``, ``ARRAY<STRING>``...) and whether it may be null."""

    name: str
    type: str
    nullable: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "nullable": self.nullable}

    @classmethod
    def from_dict(cls, obj: dict[str, Any], where: str) -> DataField:
        require_keys(obj, where, {"name", "type", "nullable"})
        name, kind = get_str(obj, "name", where), get_str(obj, "type", where)
        if not 0 < len(name) <= MAX_FIELD_NAME or not 0 < len(kind) <= MAX_TEXT:
            raise InvalidBlock(f"{where}: name must be 1-{MAX_FIELD_NAME} and type 1-{MAX_TEXT} characters")
        if not isinstance(obj["nullable"], bool):
            raise InvalidBlock(f"{where}.nullable: expected true or false")
        return cls(name, kind, obj["nullable"])


class SetDataSchema(Struct, frozen=True):
    """The schema every data slice after this block has (like ODF's SetDataSchema): the columns in
    order, the system column ``offset`` first. A dataset's first ingest records it; later ingests
    must match it."""

    fields: tuple[DataField, ...]
    TYPE: ClassVar[str] = "SetDataSchema"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.TYPE, "fields": [f.to_dict() for f in self.fields]}

    @classmethod
    def from_dict(cls, obj: dict[str, Any], where: str) -> SetDataSchema:
        require_keys(obj, where, {"type", "fields"})
        entries = obj["fields"]
        if not isinstance(entries, list) or not 0 < len(entries) <= MAX_FIELDS:
            raise InvalidBlock(f"{where}.fields: expected a list of 1-{MAX_FIELDS} fields")
        fields = []
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise InvalidBlock(f"{where}.fields[{i}]: expected an object")
            fields.append(DataField.from_dict(entry, f"{where}.fields[{i}]"))
        names = [f.name for f in fields]
        if len(set(names)) != len(names):
            raise InvalidBlock(f"{where}.fields: column names must be unique")
        return cls(tuple(fields))


Event = Seed | AddData | SetInfo | SetDataSchema
_EVENT_TYPES: dict[str, type[Seed] | type[AddData] | type[SetInfo] | type[SetDataSchema]] = {
    Seed.TYPE: Seed,
    AddData.TYPE: AddData,
    SetInfo.TYPE: SetInfo,
    SetDataSchema.TYPE: SetDataSchema,
}


def event_from_dict(obj: dict[str, Any], where: str = "event") -> Event:
    """Decode an event by its ``type`` tag."""
    kind = obj.get("type")
    event_type = _EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if event_type is None:
        raise InvalidBlock(f"{where}.type: unknown event type {str(kind)[:40]!r}")
    return event_type.from_dict(obj, where)
