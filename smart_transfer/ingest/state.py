"""What an ingest remembers between runs, stored in the dataset's checkpoint directory.

A checkpoint is a RocksDB database (the format peers and engines open) plus, beside its files:

- ``ingest-state.json``: the mode (the primary key, or none), and for key mode the bucket layout;
- with a primary key, a Parquet **mirror** of the database, one file per bucket, which Spark joins
  against to tell new, changed and unchanged rows apart without the driver reading any key.

Key mode keeps ``key -> (offset, row hash)``: the key is the JSON of the key columns (as Spark's
``to_json`` writes it), the offset that of the key's latest version, the row hash SHA-256 of the
row's JSON. Keys are spread over ``2**depth`` buckets by the top ``depth`` bits of CRC-32 of the key;
the RocksDB key is those 4 CRC bytes (big-endian) then the key, so each bucket is one contiguous key
range, written by one executor as one SST file. A bucket no row of a run touches keeps its SST and
mirror files byte for byte, so consecutive checkpoints share them and sync file by file.

Append mode (no key) keeps ``source:<fingerprint>`` for every input already ingested.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from smart_transfer.model.manifest_file import MIRROR_PREFIX, MIRROR_SUFFIX

STATE_FILE = "ingest-state.json"
FORMAT = "smart-transfer/ingest-state/1"
SOURCE_PREFIX = b"source:"
#: Key mode: a run adds buckets (doubling their number) once there are more keys than this per bucket
#: on average; smaller buckets mean less to rewrite and resend after a small change, more files.
TARGET_KEYS_PER_BUCKET = 2048
#: At most 2**MAX_BUCKET_DEPTH buckets (two files each), so the manifest stays far below its limits;
#: past about 2M keys buckets grow beyond the target instead.
MAX_BUCKET_DEPTH = 10
_OFFSET_BYTES = 8


class StateError(Exception):
    """A checkpoint this version of ingest cannot continue from."""


@dataclass(frozen=True, slots=True)
class Bucket:
    """The files of one bucket in a checkpoint directory."""

    sst: str
    mirror: str
    keys: int


@dataclass(frozen=True, slots=True)
class IngestState:
    """The contents of ``ingest-state.json``."""

    primary_key: tuple[str, ...]
    depth: int = 0
    keys: int = 0
    buckets: dict[int, Bucket] = field(default_factory=dict)

    def encode(self) -> bytes:
        buckets = {str(b): {"sst": f.sst, "mirror": f.mirror, "keys": f.keys} for b, f in sorted(self.buckets.items())}
        value = {
            "format": FORMAT,
            "primary_key": list(self.primary_key),
            "depth": self.depth,
            "keys": self.keys,
            "buckets": buckets,
        }
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)

    @classmethod
    def decode(cls, data: bytes) -> IngestState:
        try:
            value = orjson.loads(data)
            if value["format"] != FORMAT:
                raise StateError(f"checkpoint state format {value['format']!r} is not {FORMAT!r}")
            buckets = {int(b): Bucket(f["sst"], f["mirror"], int(f["keys"])) for b, f in value["buckets"].items()}
            return cls(tuple(value["primary_key"]), int(value["depth"]), int(value["keys"]), buckets)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise StateError(f"unreadable {STATE_FILE}: {exc}") from None


def load_state(directory: Path) -> IngestState:
    path = directory / STATE_FILE
    if not path.exists():
        raise StateError(f"the checkpoint has no {STATE_FILE} (made by an older ingest)")
    return IngestState.decode(path.read_bytes())


def depth_for(keys: int) -> int:
    """How many hash bits name a bucket for ``keys`` keys."""
    depth = 0
    while depth < MAX_BUCKET_DEPTH and keys > TARGET_KEYS_PER_BUCKET << depth:
        depth += 1
    return depth


def sst_name(depth: int, bucket: int) -> str:
    return f"bucket-{depth:02d}-{bucket:05d}.sst"


def mirror_name(depth: int, bucket: int) -> str:
    return f"{MIRROR_PREFIX}{depth:02d}-{bucket:05d}{MIRROR_SUFFIX}"


def db_key(key_json: bytes) -> bytes:
    """The RocksDB key of a primary key given as its JSON, e.g. ``b'{"id":"3"}'``."""
    return zlib.crc32(key_json).to_bytes(4, "big") + key_json


def db_value(offset: int, row_hash: bytes) -> bytes:
    return offset.to_bytes(_OFFSET_BYTES, "big", signed=True) + row_hash


def decode_value(value: bytes) -> tuple[int, bytes]:
    """(offset of the key's latest version, SHA-256 of that row's JSON)."""
    return int.from_bytes(value[:_OFFSET_BYTES], "big", signed=True), value[_OFFSET_BYTES:]


def lookup(db: Any, key_json: str | bytes) -> tuple[int, bytes] | None:
    """Look a primary key up in an open key-mode checkpoint (``open_checkpoint``)."""
    raw = key_json.encode() if isinstance(key_json, str) else key_json
    value = db.get(db_key(raw))
    return decode_value(value) if value is not None else None
