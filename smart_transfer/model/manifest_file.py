"""One file of a RocksDB checkpoint as manifests list it (both formats): its name, hash, size and
mutability, and the strict reader of its JSON form."""

from __future__ import annotations

import itertools
import re
from typing import Any

from msgspec import Struct

from smart_transfer.model.errors import InvalidBlock
from smart_transfer.model.fields import get_hash, get_int, get_str, require_keys
from smart_transfer.model.multihash import Multihash

FILE_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}"
_FILE_NAME = re.compile(FILE_NAME_PATTERN)
_FILE_KEYS = {"name", "physical_hash", "size", "immutable"}


#: Ingest's key mirrors, ``keys-{depth}-{bucket}.parquet``: written once, linked into later checkpoints.
MIRROR_PREFIX, MIRROR_SUFFIX = "keys-", ".parquet"


def is_immutable(name: str) -> bool:
    """RocksDB never rewrites SST and blob files; MANIFEST, CURRENT, OPTIONS and logs change."""
    return name.endswith((".sst", ".blob"))


class CheckpointFile(Struct, frozen=True):
    """A file of a checkpoint: stored as an object (kind 'checkpoints') under its hash."""

    name: str
    physical_hash: Multihash
    size: int
    immutable: bool

    def to_dict(self) -> dict[str, Any]:
        """The file's JSON form in a manifest."""
        return {
            "name": self.name,
            "physical_hash": str(self.physical_hash),
            "size": self.size,
            "immutable": self.immutable,
        }


def parse_file(entry: Any, where: str) -> CheckpointFile:
    """A file entry of a manifest; InvalidBlock for anything malformed (unsafe names included)."""
    if not isinstance(entry, dict):
        raise InvalidBlock(f"{where}: expected an object")
    require_keys(entry, where, _FILE_KEYS)
    name = get_str(entry, "name", where)
    if _FILE_NAME.fullmatch(name) is None:
        raise InvalidBlock(f"{where}.name: unsafe file name {name[:60]!r}")
    if not isinstance(entry["immutable"], bool):
        raise InvalidBlock(f"{where}.immutable: expected true or false")
    physical_hash = get_hash(entry, "physical_hash", where)
    return CheckpointFile(name, physical_hash, get_int(entry, "size", where), entry["immutable"])


def check_sorted(files: list[CheckpointFile] | tuple[CheckpointFile, ...], where: str) -> None:
    """Names strictly increasing: sorted and unique (one order, so one encoding)."""
    for before, after in itertools.pairwise(files):
        if before.name >= after.name:
            names = f"{after.name[:60]!r} follows {before.name[:60]!r}"
            raise InvalidBlock(f"{where}: names must be unique and sorted ({names})")
