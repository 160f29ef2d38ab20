"""The embedded store's staging area: where a file is written before it is renamed into place.

Every path here lies inside the store's filesystem (so the final rename is atomic) and inside its
internal directory (so it is never a key and never listed). Temporary files are fresh per writer;
a staging file is the same for every run that downloads one key, so a run resumes what a killed one
left. ``ObjectWriter`` streams one presigned upload into a temporary file and checks its MD5.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import secrets
from collections.abc import Callable
from pathlib import Path

from smart_transfer.storage.base import ObjectInfo, check_key
from smart_transfer.storage.errors import PresignRefused, StorageUnavailable


class StagingArea:
    """Temporary and staging files under ``internal`` (the store's internal directory)."""

    def __init__(self, internal: Path) -> None:
        self._root = internal.parent
        self._tmp = internal / "tmp"
        self._staging = internal / "staging"
        self._tmp.mkdir(parents=True, exist_ok=True)
        # fresh names without a random draw each: this area's own token and a counter (the process
        # id tells a forked child's names from its parent's)
        self._token = secrets.token_hex(8)
        self._count = itertools.count()

    def temp_path(self) -> Path:
        """A fresh path, for writers that rename into place."""
        return self._tmp / f"{os.getpid()}-{self._token}-{next(self._count)}"

    def staging_path(self, key: str) -> Path:
        """The one staging path of a resumable download of ``key`` (the same in every run)."""
        self._staging.mkdir(exist_ok=True)
        return self._staging / hashlib.sha256(check_key(key).encode()).hexdigest()

    def write_temp(self, data: bytes) -> Path:
        """A fresh temporary file holding ``data``."""
        temp = self.temp_path()
        try:
            # os-level calls: a buffered file object costs three more system calls per file
            # (fstat, lseek, ioctl), which thousands of small objects pay each
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
        except OSError as exc:
            temp.unlink(missing_ok=True)
            raise StorageUnavailable(f"cannot write to {self._root}: {exc.strerror}") from None
        return temp


class ObjectWriter:
    """Streams one presigned upload into the temporary file ``temp``, checks its MD5, then hands it to
    ``place`` (which renames it into place under its key, or moves it into its multipart upload)."""

    def __init__(self, temp: Path, max_bytes: int, place: Callable[[Path, str], ObjectInfo]) -> None:
        self._place = place
        self.max_bytes = max_bytes
        self._temp = temp
        self._out = open(self._temp, "wb")  # noqa: SIM115 - closed in commit/abort
        self._md5 = hashlib.md5()
        #: Bytes written so far.
        self.size = 0

    def write(self, chunk: bytes) -> None:
        """Append ``chunk``; PresignRefused (413) once the body passes ``max_bytes``."""
        self.size += len(chunk)
        if self.size > self.max_bytes:
            self.abort()
            raise PresignRefused(f"object larger than the {self.max_bytes}-byte limit", status=413)
        self._md5.update(chunk)
        self._out.write(chunk)

    def commit(self, expected_md5_hex: str | None) -> ObjectInfo:
        """Finish the upload: PresignRefused (400) if its MD5 is not ``expected_md5_hex``, else placed."""
        self._out.close()
        etag = self._md5.hexdigest()
        if expected_md5_hex is not None and etag != expected_md5_hex:
            self.abort()
            raise PresignRefused("BadDigest: body does not match the Content-MD5 the URL was signed for", status=400)
        return self._place(self._temp, etag)

    def abort(self) -> None:
        """Drop what was written."""
        self._out.close()
        self._temp.unlink(missing_ok=True)
