"""LocalStore: the embedded default store, files under a root directory.

Writes go to a temporary file of the staging area (``local_staging.py``) and are renamed into place,
so readers never see a partial object. ETags are remembered by ``local_etags.py``. Presigned URLs
point at the server app's ``/_store/{key}`` route and are signed by ``local_signer.py``; multipart
uploads follow S3's flow on local files (``local_uploads.py``).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from smart_transfer.storage.base import (
    DEFAULT_URL_TTL_SECONDS,
    STREAM_CHUNK_BYTES,
    ObjectInfo,
    ObjectStore,
    PendingUpload,
    PresignedRequest,
    StoreObserver,
    UploadedPart,
    check_key,
    check_prefix,
)
from smart_transfer.storage.digest import multipart_etag
from smart_transfer.storage.errors import ObjectNotFound, StorageUnavailable
from smart_transfer.storage.local_etags import EtagMemory
from smart_transfer.storage.local_signer import Grant, HmacSigner, load_signing_key
from smart_transfer.storage.local_staging import ObjectWriter, StagingArea
from smart_transfer.storage.local_uploads import LocalUploads

#: Internal directory inside the root; keys can never name it (no key part starts with '.').
INTERNAL_DIR = ".store"

P = ParamSpec("P")
R = TypeVar("R")


def _observed(
    operation: str,
) -> Callable[[Callable[Concatenate[LocalStore, P], R]], Callable[Concatenate[LocalStore, P], R]]:
    """Report each call of the method to the store's observer as ``operation``, named like the S3
    call it stands for (HeadObject, ListObjectsV2, ...), so metrics and tests count both stores alike.
    A listing counts once, however many keys it yields."""

    def wrap(method: Callable[Concatenate[LocalStore, P], R]) -> Callable[Concatenate[LocalStore, P], R]:
        @functools.wraps(method)
        def call(self: LocalStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
            observer = self._observer
            if observer is None:
                return method(self, *args, **kwargs)
            started, ok = time.perf_counter(), False
            try:
                result = method(self, *args, **kwargs)
                ok = True
                return result
            except ObjectNotFound:
                ok = True  # an answer, as S3's 404 is
                raise
            finally:
                observer(operation, time.perf_counter() - started, ok)

        return call

    return wrap


class LocalStore(ObjectStore):
    """Objects as files under ``root``; presigned URLs served by the smart-transfer server."""

    served_by_owner = True
    round_trips = False

    def __init__(self, root: Path, public_url: str | None = None) -> None:
        self.root = Path(root).resolve()
        self.public_url = public_url.rstrip("/") if public_url else None
        self.supports_presigning = self.public_url is not None
        self._internal = self.root / INTERNAL_DIR
        self._locks = self._internal / "locks"
        try:
            #: Where files are written before they are renamed into place.
            self.staging = StagingArea(self._internal)
            self._locks.mkdir(parents=True, exist_ok=True)
            self.signer = HmacSigner(load_signing_key(self._internal / "signing-key"), self.public_url)
        except OSError as exc:
            raise StorageUnavailable(f"cannot create store directory {self.root}: {exc.strerror}") from None
        self._etags = EtagMemory(self._internal / "etags", self.staging.temp_path)
        self.uploads = LocalUploads(self._internal / "uploads")
        self._observer: StoreObserver | None = None

    def observe(self, observer: StoreObserver) -> None:
        """Report the calls that stand for S3 requests (reads, writes, heads, listings, deletes)."""
        self._observer = observer

    def describe(self) -> str:
        return f"local directory {self.root}"

    def check_ready(self, timeout: float) -> None:
        if not os.access(self._internal, os.W_OK | os.X_OK):
            raise StorageUnavailable(f"cannot write to {self.root}")

    # -- paths and files -----------------------------------------------------------------------

    def path_of(self, key: str) -> Path:
        """The file holding ``key`` (which may not exist)."""
        return self.root / check_key(key)

    def local_path(self, key: str) -> Path:
        return self.path_of(key)

    def temp_path(self) -> Path:
        """A fresh path inside the store's filesystem, for writers that rename into place."""
        return self.staging.temp_path()

    def staging_path(self, key: str) -> Path:
        """The one staging path of a resumable download of ``key`` (the same in every run, so a run
        finds what a killed one left), inside the store's filesystem and never a key."""
        return self.staging.staging_path(key)

    def move_into_place(self, key: str, temp: Path) -> Path:
        """Rename a finished temporary file (from :meth:`temp_path` or :meth:`staging_path`) to ``key``'s
        file, atomically for readers; its ETag is computed only when someone asks for it."""
        dest = self.path_of(key)
        try:
            try:
                os.replace(temp, dest)
            except FileNotFoundError:  # the key's directory is new (tried first: it seldom is)
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(temp, dest)
        except OSError as exc:
            raise StorageUnavailable(f"cannot write {key}: {exc.strerror}") from None
        return dest

    def adopt(self, key: str, temp: Path, etag: str | None = None) -> ObjectInfo:
        """Move a finished temporary file (from :meth:`temp_path`) into place under ``key``."""
        dest = self.move_into_place(key, temp)
        try:
            stat = dest.stat()
        except OSError as exc:
            raise StorageUnavailable(f"cannot write {key}: {exc.strerror}") from None
        if etag is None:
            return self._info(key, dest)
        self._etags.remember(key, stat, etag)
        return ObjectInfo(key, stat.st_size, etag)

    def _info(self, key: str, path: Path) -> ObjectInfo:
        stat = path.stat()
        return ObjectInfo(key, stat.st_size, self._etags.etag_of(key, path, stat), stat.st_mtime)

    # -- the contract ----------------------------------------------------------------------------

    @_observed("PutObject")
    def put(self, key: str, data: bytes) -> ObjectInfo:
        check_key(key)
        return self.adopt(key, self.staging.write_temp(data), hashlib.md5(data).hexdigest())

    @_observed("PutObject")
    def put_file(self, key: str, path: Path) -> ObjectInfo:
        check_key(key)
        temp = self.temp_path()
        digest = hashlib.md5()
        try:
            with open(path, "rb") as src, open(temp, "wb") as out:
                while chunk := src.read(STREAM_CHUNK_BYTES):
                    digest.update(chunk)
                    out.write(chunk)
        except FileNotFoundError:
            temp.unlink(missing_ok=True)
            raise ObjectNotFound(str(path)) from None
        except OSError as exc:
            temp.unlink(missing_ok=True)
            raise StorageUnavailable(f"cannot write {key}: {exc.strerror}") from None
        return self.adopt(key, temp, digest.hexdigest())

    @_observed("GetObject")
    def get(self, key: str) -> bytes:
        try:
            return self.path_of(key).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ObjectNotFound(key) from None
        except OSError as exc:
            raise StorageUnavailable(f"cannot read {key}: {exc.strerror}") from None

    @_observed("GetObject")
    def stream(self, key: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        path = self.path_of(key)
        try:
            src = open(path, "rb")  # noqa: SIM115 - closed by the generator below
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ObjectNotFound(key) from None

        def chunks() -> Iterator[bytes]:
            with src:
                src.seek(start)
                remaining = None if end is None else end - start + 1
                while remaining is None or remaining > 0:
                    chunk = src.read(STREAM_CHUNK_BYTES if remaining is None else min(STREAM_CHUNK_BYTES, remaining))
                    if not chunk:
                        return
                    if remaining is not None:
                        remaining -= len(chunk)
                    yield chunk

        return chunks()

    @_observed("HeadObject")
    def head(self, key: str) -> ObjectInfo | None:
        path = self.path_of(key)
        try:
            if not path.is_file():
                return None
            return self._info(key, path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageUnavailable(f"cannot read {key}: {exc.strerror}") from None

    @_observed("DeleteObject")
    def delete(self, key: str) -> None:
        try:
            self.path_of(key).unlink(missing_ok=True)
        except IsADirectoryError:
            return
        except OSError as exc:
            raise StorageUnavailable(f"cannot delete {key}: {exc.strerror}") from None

    @_observed("ListObjectsV2")
    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        check_prefix(prefix)
        base = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        top = self.root / base if base else self.root
        keys: list[str] = []
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            rel = os.path.relpath(dirpath, self.root)
            for name in filenames:
                if name.startswith("."):
                    continue
                key = name if rel == "." else f"{rel}/{name}"
                if key.startswith(prefix):
                    keys.append(key)
        for key in sorted(keys):
            try:
                yield self._info(key, self.root / key)
            except FileNotFoundError:
                continue

    @_observed("ListObjectsV2")
    def list_children(self, prefix: str, start_after: str | None = None) -> Iterator[str]:
        check_prefix(prefix)
        top = self.root / prefix if prefix else self.root
        after = None if start_after is None else start_after + "/"
        try:
            names = sorted(name + "/" for name in os.listdir(top) if after is None or name + "/" > after)
        except (FileNotFoundError, NotADirectoryError):
            return
        yield from (name[:-1] for name in names if not name.startswith("."))

    @_observed("PutObject")
    def create_if_absent(self, key: str, data: bytes) -> bool:
        dest = self.path_of(key)
        temp = self.staging.write_temp(data)
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.link(temp, dest)  # link(2) fails if dest exists: atomic create-if-absent
        except FileExistsError:
            return False
        except OSError as exc:
            raise StorageUnavailable(f"cannot write {key}: {exc.strerror}") from None
        finally:
            temp.unlink(missing_ok=True)
        return True

    @_observed("GetObject")
    def read_ref(self, key: str) -> bytes | None:
        try:
            return self.path_of(key).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageUnavailable(f"cannot read {key}: {exc.strerror}") from None

    def compare_and_swap(self, key: str, expected: bytes | None, new: bytes) -> bool:
        lock_path = self._locks / (hashlib.sha256(check_key(key).encode()).hexdigest() + ".lock")
        with open(lock_path, "a+b") as lock:
            # an OS lock, so separate processes on one machine (server, CLI) serialize too
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if self.read_ref(key) != expected:
                    return False
                self.put(key, new)
                return True
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    # -- multipart uploads -----------------------------------------------------------------------

    def create_multipart(self, key: str) -> str:
        return self.uploads.create(key)

    def list_multipart(self, prefix: str) -> Iterator[PendingUpload]:
        return self.uploads.pending(prefix)

    def list_parts(self, key: str, upload_id: str) -> Sequence[UploadedPart]:
        return self.uploads.parts(key, upload_id)

    def presign_upload_part(
        self, key: str, upload_id: str, number: int, content_md5: str, ttl_seconds: int = DEFAULT_URL_TTL_SECONDS
    ) -> PresignedRequest:
        self.uploads.check_part_number(key, upload_id, number)
        return self.signer.presign("PUT", key, ttl_seconds, content_md5, (upload_id, number))

    def complete_multipart(self, key: str, upload_id: str, parts: Sequence[tuple[int, str]]) -> ObjectInfo:
        temp = self.temp_path()
        self.uploads.assemble(key, upload_id, parts, temp)
        info = self.adopt(key, temp, multipart_etag([md5_hex for _, md5_hex in parts]))
        self.uploads.drop(key, upload_id)
        return info

    def abort_multipart(self, key: str, upload_id: str) -> None:
        self.uploads.drop(key, upload_id)

    def part_writer(self, key: str, grant: Grant, max_bytes: int) -> ObjectWriter:
        """A writer of the part ``grant`` names (checked: its upload exists)."""
        upload_id, number = grant.upload_id, grant.part
        assert upload_id is not None and number is not None
        self.uploads.check_part_number(key, upload_id, number)

        def place(temp: Path, md5_hex: str) -> ObjectInfo:
            part = self.uploads.adopt_part(key, upload_id, number, temp, md5_hex)
            return ObjectInfo(key, part.size, part.etag)

        return ObjectWriter(self.temp_path(), max_bytes, place)

    def object_writer(self, key: str, max_bytes: int) -> ObjectWriter:
        """A writer of a presigned PUT of the whole object ``key``."""
        check_key(key)
        return ObjectWriter(self.temp_path(), max_bytes, lambda temp, etag: self.adopt(key, temp, etag))

    # -- presigning ---------------------------------------------------------------------------------

    def presign_get(self, key: str, ttl_seconds: int = DEFAULT_URL_TTL_SECONDS) -> PresignedRequest:
        return self.signer.presign("GET", key, ttl_seconds, None)

    def presign_put(
        self,
        key: str,
        ttl_seconds: int = DEFAULT_URL_TTL_SECONDS,
        content_md5: str | None = None,
        checksum_sha256: str | None = None,
    ) -> PresignedRequest:
        # the embedded store binds the MD5 and its ETags are the MD5s: a checksum would add nothing
        return self.signer.presign("PUT", key, ttl_seconds, content_md5)

    def verify_presigned(self, method: str, key: str, query: Mapping[str, str]) -> Grant:
        """Check a presigned request; returns what it is bound to, else raises PresignRefused."""
        return self.signer.verify(method, key, query)
