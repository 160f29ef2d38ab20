"""LocalStore: the embedded default store, files under a root directory.

Writes go to a temporary file and are renamed into place, so readers never see a partial object.
Presigned URLs point at the server app's ``/_store/{key}`` route; they are HMAC-SHA256 signed with a
key kept in the store (so they survive restarts), expire, and are bound to one method, one key and,
for PUT, optionally one Content-MD5 and one part of one multipart upload (``local_uploads.py``).
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import os
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode

from smart_transfer.storage.base import (
    DEFAULT_URL_TTL_SECONDS,
    MAX_URL_TTL_SECONDS,
    STREAM_CHUNK_BYTES,
    ObjectInfo,
    ObjectStore,
    PendingUpload,
    PresignedRequest,
    UploadedPart,
    check_key,
    check_prefix,
)
from smart_transfer.storage.digest import md5_hex_from_base64, multipart_etag
from smart_transfer.storage.errors import (
    InvalidKey,
    ObjectNotFound,
    PresigningUnavailable,
    PresignRefused,
    StorageUnavailable,
)
from smart_transfer.storage.local_uploads import LocalUploads

#: Internal directory inside the root; keys can never name it (no key part starts with '.').
INTERNAL_DIR = ".store"
#: Route prefix the server app serves presigned requests under.
PRESIGN_ROUTE = "/_store/"
#: How many computed ETags are remembered (each entry ~200 bytes).
ETAG_CACHE_ENTRIES = 200_000


@dataclass(frozen=True, slots=True)
class Grant:
    """What a valid presigned request may do beyond its method and key: the MD5 (hex) its body must
    have, and the multipart upload and part number it writes."""

    md5_hex: str | None = None
    upload_id: str | None = None
    part: int | None = None


class LocalStore(ObjectStore):
    """Objects as files under ``root``; presigned URLs served by the smart-transfer server."""

    served_by_owner = True

    def __init__(self, root: Path, public_url: str | None = None) -> None:
        self.root = Path(root).resolve()
        self.public_url = public_url.rstrip("/") if public_url else None
        self.supports_presigning = self.public_url is not None
        self._internal = self.root / INTERNAL_DIR
        self._tmp = self._internal / "tmp"
        self._locks = self._internal / "locks"
        try:
            self._tmp.mkdir(parents=True, exist_ok=True)
            self._locks.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageUnavailable(f"cannot create store directory {self.root}: {exc.strerror}") from None
        self._signing_key = self._load_signing_key()
        self._etags: OrderedDict[tuple[int, int, int], str] = OrderedDict()
        self._kept_etags = self._internal / "etags"
        self.uploads = LocalUploads(self._internal / "uploads")

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

    def _load_signing_key(self) -> bytes:
        path = self._internal / "signing-key"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return path.read_bytes()
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_bytes(32))
        return path.read_bytes()

    def temp_path(self) -> Path:
        """A fresh path inside the store's filesystem, for writers that rename into place."""
        return self._tmp / f"{os.getpid()}-{secrets.token_hex(8)}"

    def staging_path(self, key: str) -> Path:
        """The one staging path of a resumable download of ``key`` (the same in every run, so a run
        finds what a killed one left), inside the store's filesystem and never a key."""
        staging = self._internal / "staging"
        staging.mkdir(exist_ok=True)
        return staging / hashlib.sha256(check_key(key).encode()).hexdigest()

    def move_into_place(self, key: str, temp: Path) -> Path:
        """Rename a finished temporary file (from :meth:`temp_path` or :meth:`staging_path`) to ``key``'s
        file, atomically for readers; its ETag is computed only when someone asks for it."""
        dest = self.path_of(key)
        try:
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
        self._remember_etag(stat, etag)
        if "-" in etag:
            self._keep_etag(key, stat, etag)
        return ObjectInfo(key, stat.st_size, etag)

    def _etag_file(self, key: str) -> Path:
        return self._kept_etags / hashlib.sha256(key.encode()).hexdigest()

    def _keep_etag(self, key: str, stat: os.stat_result, etag: str) -> None:
        """A multipart ETag cannot be recomputed from the bytes: keep it on disk, tied to this file."""
        try:
            self._kept_etags.mkdir(exist_ok=True)
            temp = self.temp_path()
            temp.write_text(f"{stat.st_ino} {stat.st_size} {stat.st_mtime_ns} {etag}")
            os.replace(temp, self._etag_file(key))
        except OSError as exc:
            raise StorageUnavailable(f"cannot write {key}: {exc.strerror}") from None

    def _kept_etag(self, key: str, signature: tuple[int, int, int]) -> str | None:
        try:
            ino, size, mtime_ns, etag = self._etag_file(key).read_text().split()
        except (FileNotFoundError, ValueError):
            return None
        return etag if (int(ino), int(size), int(mtime_ns)) == signature else None

    def _write_temp(self, data: bytes) -> Path:
        temp = self.temp_path()
        try:
            with open(temp, "wb") as out:
                out.write(data)
        except OSError as exc:
            temp.unlink(missing_ok=True)
            raise StorageUnavailable(f"cannot write to {self.root}: {exc.strerror}") from None
        return temp

    def _remember_etag(self, stat: os.stat_result, etag: str) -> None:
        self._etags[(stat.st_ino, stat.st_size, stat.st_mtime_ns)] = etag
        if len(self._etags) > ETAG_CACHE_ENTRIES:
            self._etags.popitem(last=False)

    def _info(self, key: str, path: Path) -> ObjectInfo:
        stat = path.stat()
        signature = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        etag = self._etags.get(signature) or self._kept_etag(key, signature)
        if etag is None:
            digest = hashlib.md5()
            with open(path, "rb") as src:
                while chunk := src.read(STREAM_CHUNK_BYTES):
                    digest.update(chunk)
            etag = digest.hexdigest()
            self._remember_etag(stat, etag)
        return ObjectInfo(key, stat.st_size, etag, stat.st_mtime)

    # -- the contract ----------------------------------------------------------------------------

    def put(self, key: str, data: bytes) -> ObjectInfo:
        check_key(key)
        return self.adopt(key, self._write_temp(data), hashlib.md5(data).hexdigest())

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

    def get(self, key: str) -> bytes:
        try:
            return self.path_of(key).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ObjectNotFound(key) from None
        except OSError as exc:
            raise StorageUnavailable(f"cannot read {key}: {exc.strerror}") from None

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

    def delete(self, key: str) -> None:
        try:
            self.path_of(key).unlink(missing_ok=True)
        except IsADirectoryError:
            return
        except OSError as exc:
            raise StorageUnavailable(f"cannot delete {key}: {exc.strerror}") from None

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

    def list_children(self, prefix: str) -> Iterator[str]:
        check_prefix(prefix)
        top = self.root / prefix if prefix else self.root
        try:
            names = sorted(os.listdir(top))
        except (FileNotFoundError, NotADirectoryError):
            return
        yield from (name for name in names if not name.startswith("."))

    def create_if_absent(self, key: str, data: bytes) -> bool:
        dest = self.path_of(key)
        temp = self._write_temp(data)
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
        return self._presign("PUT", key, ttl_seconds, content_md5, (upload_id, number))

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

        return ObjectWriter(self, key, max_bytes, place)

    # -- presigning --------------------------------------------------------------------------------

    def _signature(self, method: str, key: str, expires: int, md5_hex: str, part: tuple[str, int] | None) -> str:
        message = f"{method}\n{key}\n{expires}\n{md5_hex}"
        if part is not None:
            message += f"\n{part[0]}\n{part[1]}"
        return hmac.new(self._signing_key, message.encode(), hashlib.sha256).hexdigest()

    def _presign(
        self, method: str, key: str, ttl_seconds: int, content_md5: str | None, part: tuple[str, int] | None = None
    ) -> PresignedRequest:
        if self.public_url is None:
            raise PresigningUnavailable("this local store has no public URL to presign against")
        check_key(key)
        if not 1 <= ttl_seconds <= MAX_URL_TTL_SECONDS:
            raise ValueError(f"URL lifetime must be 1..{MAX_URL_TTL_SECONDS} seconds")
        expires = int(time.time()) + ttl_seconds
        md5_hex = md5_hex_from_base64(content_md5) if content_md5 else ""
        signature = self._signature(method, key, expires, md5_hex, part)
        query = {"method": method, "expires": str(expires), "signature": signature}
        if md5_hex:
            query["md5"] = md5_hex
        if part is not None:
            query.update(upload=part[0], part=str(part[1]))
        url = f"{self.public_url}{PRESIGN_ROUTE}{quote(key)}?{urlencode(query)}"
        headers = {"Content-MD5": content_md5} if content_md5 else {}
        return PresignedRequest(method, url, expires, headers)

    def presign_get(self, key: str, ttl_seconds: int = DEFAULT_URL_TTL_SECONDS) -> PresignedRequest:
        return self._presign("GET", key, ttl_seconds, None)

    def presign_put(
        self, key: str, ttl_seconds: int = DEFAULT_URL_TTL_SECONDS, content_md5: str | None = None
    ) -> PresignedRequest:
        return self._presign("PUT", key, ttl_seconds, content_md5)

    def verify_presigned(self, method: str, key: str, query: Mapping[str, str]) -> Grant:
        """Check a presigned request; returns what it is bound to, else raises PresignRefused."""
        try:
            check_key(key)
        except InvalidKey:
            raise PresignRefused("invalid key") from None
        signature = query.get("signature", "")
        bound_method = query.get("method", "")
        md5_hex = query.get("md5", "")
        try:
            expires = int(query.get("expires", ""))
            part = (query["upload"], int(query["part"])) if "upload" in query or "part" in query else None
        except (KeyError, ValueError):
            raise PresignRefused("missing or malformed expiry or part") from None
        expected = self._signature(bound_method, key, expires, md5_hex, part)
        if not hmac.compare_digest(expected, signature):
            raise PresignRefused("signature does not match")
        allowed = {bound_method, "HEAD"} if bound_method == "GET" else {bound_method}
        if method not in allowed:
            raise PresignRefused(f"URL was signed for {bound_method}, not {method}")
        if time.time() > expires:
            raise PresignRefused("URL expired")
        if part is None:
            return Grant(md5_hex or None)
        return Grant(md5_hex or None, part[0], part[1])


class ObjectWriter:
    """Streams one presigned upload into a LocalStore: temp file, MD5 check, then ``place`` (by
    default: rename into place under ``key``; a part writer moves it into its upload)."""

    def __init__(
        self, store: LocalStore, key: str, max_bytes: int, place: Callable[[Path, str], ObjectInfo] | None = None
    ) -> None:
        self._key = check_key(key)
        self._place = place or (lambda temp, etag: store.adopt(self._key, temp, etag))
        self.max_bytes = max_bytes
        self._temp = store.temp_path()
        self._out = open(self._temp, "wb")  # noqa: SIM115 - closed in commit/abort
        self._md5 = hashlib.md5()
        self.size = 0

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.max_bytes:
            self.abort()
            raise PresignRefused(f"object larger than the {self.max_bytes}-byte limit", status=413)
        self._md5.update(chunk)
        self._out.write(chunk)

    def commit(self, expected_md5_hex: str | None) -> ObjectInfo:
        self._out.close()
        etag = self._md5.hexdigest()
        if expected_md5_hex is not None and etag != expected_md5_hex:
            self.abort()
            raise PresignRefused("BadDigest: body does not match the Content-MD5 the URL was signed for", status=400)
        return self._place(self._temp, etag)

    def abort(self) -> None:
        self._out.close()
        self._temp.unlink(missing_ok=True)
