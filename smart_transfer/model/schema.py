"""The dataset model's wire formats as JSON Schemas: metadata blocks with every event, and checkpoint
manifests. They are published in the AsyncAPI document (the metadata tarball carries exactly these
bytes), so a client can be written from the document alone. A test holds them to the encoders:
every encoded block and manifest validates, and what the decoders refuse, the schemas refuse."""

from __future__ import annotations

from typing import Any

from smart_transfer.model.block import MAX_BLOCK_BYTES
from smart_transfer.model.events import (
    DATASET_ID_PATTERN,
    DATASET_KINDS,
    MAX_FIELD_NAME,
    MAX_FIELDS,
    MAX_KEYWORDS,
    MAX_TEXT,
    TIMESTAMP_PATTERN,
    AddData,
    Seed,
    SetDataSchema,
    SetInfo,
)
from smart_transfer.model.manifest import FILE_NAME_PATTERN, FORMAT, MAX_FILES, MAX_MANIFEST_BYTES
from smart_transfer.model.manifest_pages import (
    BOUNDARY_BITS,
    MAX_CHECKPOINT_FILES,
    MAX_LEVEL,
    MAX_PAGE_BYTES,
    MAX_PAGE_ENTRIES,
    PAGE_FORMAT,
)
from smart_transfer.model.multihash import HASH_PATTERN

CANONICAL = (
    "Canonical encoding: UTF-8 JSON with keys sorted and no insignificant whitespace, integers only "
    "(no floats), times as RFC 3339 UTC text. Any other spelling of the same value is refused, so the "
    "multihash of these exact bytes is the address."
)


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(properties: dict[str, Any], required: list[str], description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "additionalProperties": False,
        "required": required,
        "properties": properties,
    }


def _event(kind: str, properties: dict[str, Any], required: list[str], description: str) -> dict[str, Any]:
    return _object({"type": {"const": kind}, **properties}, ["type", *required], description)


NATURAL = {"type": "integer", "minimum": 0}
HASH = {"type": "string", "pattern": HASH_PATTERN, "description": "multihash, multibase base16: f + 1220 + sha2-256"}
TIMESTAMP = {"type": "string", "pattern": f"^{TIMESTAMP_PATTERN}$", "description": "RFC 3339 UTC time"}


def block_schemas() -> dict[str, dict[str, Any]]:
    """Schemas of the block format: the block, the event union and every event and part."""
    events = _event_schemas()
    return {
        **_part_schemas(),
        "MetadataEvent": {
            "description": "What a block records, tagged by 'type'.",
            "oneOf": [_ref(name) for name in events],
            "discriminator": "type",
        },
        "MetadataBlock": _object(
            {
                "sequence_number": NATURAL,
                "prev_block_hash": {"oneOf": [HASH, {"type": "null"}]},
                "system_time": TIMESTAMP,
                "event": _ref("MetadataEvent"),
            },
            ["sequence_number", "prev_block_hash", "system_time", "event"],
            f"One link of a dataset's chain (at most {MAX_BLOCK_BYTES} bytes). Sequence numbers count from 0; "
            f"each block names the previous block's hash (null for the Seed). {CANONICAL}",
        ),
        **events,
    }


def _event_schemas() -> dict[str, dict[str, Any]]:
    """The schema of every event, by its type."""
    return {
        Seed.TYPE: _event(
            Seed.TYPE,
            {
                "dataset_id": {"type": "string", "pattern": f"^{DATASET_ID_PATTERN}$"},
                "kind": {"enum": list(DATASET_KINDS)},
            },
            ["dataset_id", "kind"],
            "The first block of every dataset (sequence number 0, no previous block): its identity. A forced "
            "rewrite may replace a history only by one starting from the same Seed.",
        ),
        AddData.TYPE: _event(
            AddData.TYPE,
            {"new_data": _ref("DataSlice"), "new_checkpoint": _ref("CheckpointRef"), "new_watermark": TIMESTAMP},
            [],
            "New records (a data slice whose offsets continue the chain's), a new checkpoint, and/or a watermark.",
        ),
        SetDataSchema.TYPE: _event(
            SetDataSchema.TYPE,
            {"fields": {"type": "array", "minItems": 1, "maxItems": MAX_FIELDS, "items": _ref("DataField")}},
            ["fields"],
            "The schema every data slice after this block has, columns in order (the system column 'offset' "
            "first); names are unique. A dataset's first ingest records it; later ingests must match it.",
        ),
        SetInfo.TYPE: _event(
            SetInfo.TYPE,
            {
                "description": {"type": "string", "maxLength": MAX_TEXT},
                "keywords": {"type": "array", "maxItems": MAX_KEYWORDS, "items": {"type": "string", "maxLength": 256}},
            },
            ["description", "keywords"],
            "A human-facing description of the dataset.",
        ),
    }


def _part_schemas() -> dict[str, dict[str, Any]]:
    """The schemas of the parts events are made of."""
    return {
        "DataField": _object(
            {
                "name": {"type": "string", "minLength": 1, "maxLength": MAX_FIELD_NAME},
                "type": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT, "description": "Spark SQL DDL type"},
                "nullable": {"type": "boolean"},
            },
            ["name", "type", "nullable"],
            "One column of the data slices: name, SQL type as Spark writes it (BIGINT, DECIMAL(10,2), TIMESTAMP...).",
        ),
        "OffsetInterval": _object(
            {"start": NATURAL, "end": NATURAL}, ["start", "end"], "Inclusive range of record offsets (end >= start)."
        ),
        "DataSlice": _object(
            {"physical_hash": HASH, "size": NATURAL, "offset_interval": _ref("OffsetInterval"), "num_records": NATURAL},
            ["physical_hash", "size", "offset_interval", "num_records"],
            "A data object (a Parquet file) named by its hash, kind 'data'; num_records = end - start + 1.",
        ),
        "CheckpointRef": _object(
            {"physical_hash": HASH, "size": NATURAL},
            ["physical_hash", "size"],
            "A checkpoint manifest object (kind 'checkpoints'): a CheckpointManifest, or the root of a tree of "
            "CheckpointManifestPage objects; its pages and files are objects of that kind too.",
        ),
    }


def manifest_schemas() -> dict[str, dict[str, Any]]:
    """Schemas of the checkpoint manifest."""
    file = _object(
        {
            "name": {"type": "string", "pattern": f"^{FILE_NAME_PATTERN}$"},
            "physical_hash": HASH,
            "size": NATURAL,
            "immutable": {"type": "boolean", "description": "true for RocksDB SST and blob files"},
        },
        ["name", "physical_hash", "size", "immutable"],
        "One file of a RocksDB checkpoint, stored as an object of kind 'checkpoints' named by its hash.",
    )
    manifest = _object(
        {
            "format": {"const": FORMAT},
            "files": {"type": "array", "maxItems": MAX_FILES, "items": _ref("CheckpointFile")},
        },
        ["format", "files"],
        f"The files of one RocksDB checkpoint, sorted by unique name (at most {MAX_MANIFEST_BYTES} bytes). {CANONICAL}",
    )
    return {"CheckpointFile": file, "CheckpointManifest": manifest, **_page_schemas()}


def _page_schemas() -> dict[str, dict[str, Any]]:
    """Schemas of the paged manifest (format 2): a page entry and the two kinds of page."""
    entry = _object(
        {
            "hash": HASH,
            "size": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_BYTES, "description": "the page's bytes"},
            "files": {"type": "integer", "minimum": 1, "description": "files under the page"},
            "bytes": {**NATURAL, "description": "total size of the files under the page"},
        },
        ["hash", "size", "files", "bytes"],
        "A child page as its parent lists it: an object of kind 'checkpoints' named by its hash.",
    )
    leaf = _object(
        {
            "format": {"const": PAGE_FORMAT},
            "level": {"const": 0},
            "files": {"type": "array", "maxItems": MAX_PAGE_ENTRIES, "items": _ref("CheckpointFile")},
        },
        ["format", "level", "files"],
        "A leaf page: files sorted by unique name.",
    )
    inner = _object(
        {
            "format": {"const": PAGE_FORMAT},
            "level": {"type": "integer", "minimum": 1, "maximum": MAX_LEVEL},
            "pages": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_PAGE_ENTRIES,
                "items": _ref("CheckpointPageEntry"),
            },
        },
        ["format", "level", "pages"],
        "An inner page: pages of the level below, in file-name order.",
    )
    description = (
        f"A page of a paged checkpoint manifest (at most {MAX_PAGE_BYTES} bytes), a tree addressed by hash whose "
        "root a block's checkpoint names. Pages end after an entry whose hash (BLAKE2b-32 of a file's name; the "
        f"last 4 bytes of a child's page hash, big-endian) has {BOUNDARY_BITS} low zero bits, never before 2 "
        f"entries, always at {MAX_PAGE_ENTRIES}; a tree split otherwise is refused, so one set of files has one "
        f"root, and a new checkpoint shares every page its changes do not touch. At most {MAX_CHECKPOINT_FILES} "
        f"files. {CANONICAL}"
    )
    return {
        "CheckpointPageEntry": entry,
        "CheckpointManifestPage": {"oneOf": [leaf, inner], "description": description},
    }
