"""Hash files while reading them once: the multihash that names an object and the MD5 S3 checks."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from smart_transfer.model import Multihash
from smart_transfer.model.multihash import SHA2_256, new_hasher
from smart_transfer.storage.base import STREAM_CHUNK_BYTES


@dataclass(frozen=True, slots=True)
class FileDigest:
    """A file's content address, size and MD5 (hex)."""

    multihash: Multihash
    size: int
    md5_hex: str


def digest_file(path: Path, code: int = SHA2_256) -> FileDigest:
    """Read ``path`` once, computing its multihash, size and MD5."""
    hasher = new_hasher(code)
    md5 = hashlib.md5()
    size = 0
    with open(path, "rb") as src:
        while chunk := src.read(STREAM_CHUNK_BYTES):
            hasher.update(chunk)
            md5.update(chunk)
            size += len(chunk)
    return FileDigest(Multihash(code, hasher.digest()), size, md5.hexdigest())
