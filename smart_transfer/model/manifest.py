"""The checkpoint manifest: every file of a RocksDB checkpoint with its hash, size and mutability.
Pure: canonical encoding like blocks, so a manifest's address is the hash of its bytes."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from smart_transfer.model import InvalidBlock, Multihash
from smart_transfer.model.encoding import canonical_bytes, decode_object
from smart_transfer.model.fields import get_hash, get_int, get_str, require_keys

FORMAT = "rocksdb-checkpoint/1"
#: Manifests are metadata: bounded like blocks are.
MAX_MANIFEST_BYTES = 1024 * 1024
MAX_FILES = 10_000
FILE_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}"
_FILE_NAME = re.compile(FILE_NAME_PATTERN)


def is_immutable(name: str) -> bool:
    """RocksDB never rewrites SST and blob files; MANIFEST, CURRENT, OPTIONS and logs change."""
    return name.endswith((".sst", ".blob"))


@dataclass(frozen=True, slots=True)
class CheckpointFile:
    name: str
    physical_hash: Multihash
    size: int
    immutable: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "physical_hash": str(self.physical_hash),
            "size": self.size,
            "immutable": self.immutable,
        }


@dataclass(frozen=True, slots=True)
class CheckpointManifest:
    """The files of one checkpoint, sorted by name."""

    files: tuple[CheckpointFile, ...]

    def encode(self) -> bytes:
        return canonical_bytes({"format": FORMAT, "files": [f.to_dict() for f in self.files]})

    def hash(self) -> Multihash:
        return Multihash.of(self.encode())


def decode_manifest(data: bytes) -> CheckpointManifest:
    """Parse manifest bytes; raises InvalidBlock for anything malformed (including unsafe names)."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise InvalidBlock(f"checkpoint manifest of {len(data)} bytes exceeds {MAX_MANIFEST_BYTES}")
    obj = decode_object(data)
    require_keys(obj, "manifest", {"format", "files"})
    if obj["format"] != FORMAT:
        raise InvalidBlock(f"manifest.format: expected {FORMAT!r}")
    entries = obj["files"]
    if not isinstance(entries, list) or len(entries) > MAX_FILES:
        raise InvalidBlock(f"manifest.files: expected a list of at most {MAX_FILES} files")
    files = []
    for i, entry in enumerate(entries):
        where = f"manifest.files[{i}]"
        if not isinstance(entry, dict):
            raise InvalidBlock(f"{where}: expected an object")
        require_keys(entry, where, {"name", "physical_hash", "size", "immutable"})
        name = get_str(entry, "name", where)
        if _FILE_NAME.fullmatch(name) is None:
            raise InvalidBlock(f"{where}.name: unsafe file name {name[:60]!r}")
        if not isinstance(entry["immutable"], bool):
            raise InvalidBlock(f"{where}.immutable: expected true or false")
        files.append(
            CheckpointFile(
                name, get_hash(entry, "physical_hash", where), get_int(entry, "size", where), entry["immutable"]
            )
        )
    names = [f.name for f in files]
    if names != sorted(set(names)):
        raise InvalidBlock("manifest.files: names must be unique and sorted")
    manifest = CheckpointManifest(tuple(files))
    if manifest.encode() != data:
        raise InvalidBlock("manifest bytes are not in canonical form")
    return manifest
