"""The embedded store's ETags: S3's ETag of each file, computed once and remembered.

A single-part ETag is the MD5 of the bytes, so it is cached in memory (bounded) and recomputed after
a restart. A multipart ETag cannot be recomputed from the bytes, so it is also kept on disk. Either is
tied to the file's inode, size and modification time: a file replaced or changed is hashed anew.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from smart_transfer.storage.base import STREAM_CHUNK_BYTES
from smart_transfer.storage.errors import StorageUnavailable

#: How many computed ETags are remembered in memory (each entry ~200 bytes).
ETAG_CACHE_ENTRIES = 200_000

_Signature = tuple[int, int, int]


def _signature(stat: os.stat_result) -> _Signature:
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


def md5_of_file(path: Path) -> str:
    """The MD5 (hex) of the file at ``path``, read in chunks."""
    digest = hashlib.md5()
    with open(path, "rb") as src:
        while chunk := src.read(STREAM_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


class EtagMemory:
    """ETags of the files of one store; multipart ones kept under ``directory``, written through
    temporary files from ``temp_path`` (renamed into place, so a reader never sees half of one)."""

    def __init__(self, directory: Path, temp_path: Callable[[], Path]) -> None:
        self._kept = directory
        self._temp_path = temp_path
        self._cache: OrderedDict[_Signature, str] = OrderedDict()

    def _file(self, key: str) -> Path:
        return self._kept / hashlib.sha256(key.encode()).hexdigest()

    def remember(self, key: str, stat: os.stat_result, etag: str) -> None:
        """``etag`` is the ETag of ``key``'s file as ``stat`` describes it."""
        self._cache[_signature(stat)] = etag
        if len(self._cache) > ETAG_CACHE_ENTRIES:
            self._cache.popitem(last=False)
        if "-" in etag:
            self._keep(key, stat, etag)

    def _keep(self, key: str, stat: os.stat_result, etag: str) -> None:
        try:
            self._kept.mkdir(exist_ok=True)
            temp = self._temp_path()
            temp.write_text(f"{stat.st_ino} {stat.st_size} {stat.st_mtime_ns} {etag}")
            os.replace(temp, self._file(key))
        except OSError as exc:
            raise StorageUnavailable(f"cannot write {key}: {exc.strerror}") from None

    def _kept_etag(self, key: str, signature: _Signature) -> str | None:
        try:
            ino, size, mtime_ns, etag = self._file(key).read_text().split()
        except (FileNotFoundError, ValueError):
            return None
        return etag if (int(ino), int(size), int(mtime_ns)) == signature else None

    def etag_of(self, key: str, path: Path, stat: os.stat_result) -> str:
        """The ETag of ``key``'s file at ``path`` (as ``stat`` describes it): remembered, else its MD5."""
        signature = _signature(stat)
        etag = self._cache.get(signature) or self._kept_etag(key, signature)
        if etag is None:
            etag = md5_of_file(path)
            self.remember(key, stat, etag)
        return etag
