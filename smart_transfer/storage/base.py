"""The ObjectStore contract every store implements; one test suite checks it on all of them."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from smart_transfer.storage.errors import InvalidKey

#: Default lifetime of presigned URLs: minutes, not hours.
DEFAULT_URL_TTL_SECONDS = 300
#: Longest lifetime a caller may ask for.
MAX_URL_TTL_SECONDS = 7 * 24 * 3600
#: Connections an S3 store keeps open to its endpoint (server-side calls; clients transfer directly).
DEFAULT_MAX_CONNECTIONS = 64
#: Chunk size used when streaming objects.
STREAM_CHUNK_BYTES = 1024 * 1024
#: The most bytes one commit reads back from the store to confirm objects that neither an ETag nor a
#: checksum confirms (the server's ``--verify-read-limit``).
DEFAULT_READBACK_BYTES = 8 * 1024**3

#: Told of every call a store makes to its backend: (operation, seconds, succeeded).
StoreObserver = Callable[[str, float, bool], None]

_KEY_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=-]*")


def check_key(key: str) -> str:
    """Refuse keys that could escape a root or prefix: empty parts, dot-parts, odd characters."""
    if not isinstance(key, str) or not key or len(key) > 900:
        raise InvalidKey("a key must be 1-900 characters of text")
    for part in key.split("/"):
        if _KEY_PART.fullmatch(part) is None or part.endswith("."):
            raise InvalidKey(
                f"invalid key {key[:120]!r}: each part must be letters, digits and ._=- not starting with '.'"
            )
    return key


def check_prefix(prefix: str) -> str:
    """A list prefix: empty, or a valid key optionally ending with '/'."""
    if prefix:
        check_key(prefix.rstrip("/") or "x")
    return prefix


# The stores' records are NamedTuples: every command loads them, and defining a frozen dataclass costs
# about 0.9 ms here (Python 3.11 compiles its generated methods) against 0.13 ms; msgspec's Structs would
# load msgspec into ``serve --help``, which reads this module's defaults.


class ObjectInfo(NamedTuple):
    """What a store knows of one object: key, size in bytes, and the hex MD5 of its bytes (ETag)."""

    key: str
    size: int
    etag: str
    #: Last modification, Unix seconds (0 when the store did not say).
    modified: float = 0.0
    #: The store says the ETag is not the MD5 of the bytes (S3 with SSE-KMS or SSE-C): it confirms nothing.
    opaque_etag: bool = False
    #: The base64 SHA-256 of the bytes that the store checked on arrival and keeps ("" when none).
    checksum_sha256: str = ""


class UploadedPart(NamedTuple):
    """One part a multipart upload holds: its number, size and ETag (the hex MD5 of its bytes, unless
    ``opaque_etag``: then the store's own tag, which a completion must quote)."""

    number: int
    size: int
    etag: str
    opaque_etag: bool = False


#: What :func:`stored_mismatch` says of an ETag that is not the promised one.
MD5_MISMATCH = "content does not match the promised MD5"


def stored_mismatch(info: ObjectInfo | UploadedPart | None, size: int, etag: str | None = None) -> str | None:
    """The check of an object (or part) a store holds against the one promised: ``size`` bytes and,
    when given, ETag ``etag``. ``info`` is the store's answer (a head, a listing entry or a listed part;
    None when absent). Why it is not the promised one (one line), or None when it is. An opaque ETag
    (``info.opaque_etag``) is not compared: it confirms the size only, and a caller that needs the
    bytes confirmed does so otherwise (the commit: the store's checksum, or reading them back)."""
    if info is None:
        return "missing"
    if info.size != size:
        return f"{info.size} bytes, expected {size}"
    if etag is not None and not info.opaque_etag and info.etag != etag:
        return MD5_MISMATCH
    return None


def stored_as_promised(info: ObjectInfo | UploadedPart | None, size: int, etag: str | None = None) -> bool:
    """Whether :func:`stored_mismatch` finds nothing wrong."""
    return stored_mismatch(info, size, etag) is None


class PendingUpload(NamedTuple):
    """A multipart upload in progress (neither completed nor aborted): which key, its id, and when it
    started (Unix seconds)."""

    key: str
    upload_id: str
    initiated: float


class PresignedRequest(NamedTuple):
    """An HTTP request anyone holding it may make until ``expires_at`` (Unix seconds)."""

    method: str
    url: str
    expires_at: int
    headers: Mapping[str, str] = MappingProxyType({})


class ObjectStore(ABC):
    """Flat key -> bytes storage with conditional writes and presigned URLs.

    Keys are ``/``-separated paths checked by :func:`check_key`. All methods are blocking; async
    callers run them in a thread. Every method raises only :class:`StorageError` subclasses.
    """

    #: Whether presign_get/presign_put are available.
    supports_presigning: bool = True
    #: Whether this store's presigned URLs point back at the server that owns it (the embedded
    #: store): that server must serve them, and redirecting a reader to them gains nothing.
    served_by_owner: bool = False
    #: Whether each call is a network round trip (S3): then one listing page can cost less than a HEAD
    #: per object; on a local disk a stat is cheaper than walking a directory.
    round_trips: bool = True

    def local_path(self, key: str) -> Path | None:
        """Where ``key``'s bytes live on this machine's disk, for stores that keep them there."""
        return None

    @abstractmethod
    def describe(self) -> str:
        """A short human description (for logs and ``GET /``)."""

    @abstractmethod
    def put(self, key: str, data: bytes) -> ObjectInfo:
        """Store ``data`` under ``key`` (replacing any object); atomic for readers."""

    @abstractmethod
    def put_file(self, key: str, path: Path) -> ObjectInfo:
        """Store the file at ``path`` under ``key``; atomic for readers."""

    @abstractmethod
    def get(self, key: str) -> bytes:
        """The whole object; raises ObjectNotFound."""

    @abstractmethod
    def stream(self, key: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """The object's bytes ``[start, end]`` (inclusive end, None: to the end) in chunks."""

    @abstractmethod
    def head(self, key: str) -> ObjectInfo | None:
        """Size and ETag of an object, or None when absent."""

    def head_many(self, keys: Sequence[str]) -> dict[str, ObjectInfo | None]:
        """:meth:`head` of each key (None: absent). Stores with a remote backend ask in parallel,
        as many at a time as their connection pool holds, so the cost grows with ``keys``, not with
        what the store holds."""
        return {key: self.head(key) for key in keys}

    def exists(self, key: str) -> bool:
        """Whether ``key`` exists."""
        return self.head(key) is not None

    @abstractmethod
    def delete(self, key: str) -> None:
        """Delete ``key``; deleting an absent key is not an error."""

    @abstractmethod
    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every object whose key starts with ``prefix``, in key order."""

    @abstractmethod
    def list_children(self, prefix: str, start_after: str | None = None) -> Iterator[str]:
        """The distinct next path parts below ``prefix`` (which ends with '/' or is empty), in the order S3
        lists common prefixes: by ``part + "/"`` (so ``a-b`` comes before ``a``); with ``start_after``,
        only the parts after that one (read lazily: S3 lists from there, a page at a time)."""

    @abstractmethod
    def create_if_absent(self, key: str, data: bytes) -> bool:
        """Atomically create ``key`` only if absent; True when this call created it."""

    @abstractmethod
    def read_ref(self, key: str) -> bytes | None:
        """The current value of a small reference object kept by compare_and_swap, or None."""

    @abstractmethod
    def compare_and_swap(self, key: str, expected: bytes | None, new: bytes) -> bool:
        """Set the reference ``key`` to ``new`` only if it currently holds ``expected`` (None: absent).
        True when this call moved it; exactly one of any number of racing callers wins."""

    @abstractmethod
    def presign_get(self, key: str, ttl_seconds: int = DEFAULT_URL_TTL_SECONDS) -> PresignedRequest:
        """A GET of ``key`` that works without credentials until it expires."""

    @abstractmethod
    def presign_put(
        self,
        key: str,
        ttl_seconds: int = DEFAULT_URL_TTL_SECONDS,
        content_md5: str | None = None,
        checksum_sha256: str | None = None,
    ) -> PresignedRequest:
        """A PUT of ``key``; with ``content_md5`` (base64) the store refuses any other body. With
        ``checksum_sha256`` (base64 SHA-256 of the body), a store configured to bind checksums signs it
        into the URL too (S3 then checks the body against it on arrival); others ignore it. The request's
        headers carry whatever the URL binds (the MD5, the checksum, the server-side encryption)."""

    # -- multipart uploads (S3's flow; the embedded store implements the same) ----------------------

    @abstractmethod
    def create_multipart(self, key: str) -> str:
        """Start a multipart upload of ``key``; returns its upload id. Nothing is visible at ``key``
        until :meth:`complete_multipart`."""

    @abstractmethod
    def list_multipart(self, prefix: str) -> Iterator[PendingUpload]:
        """The multipart uploads in progress whose key starts with ``prefix``."""

    @abstractmethod
    def list_parts(self, key: str, upload_id: str) -> Sequence[UploadedPart]:
        """The parts an upload holds so far, by number; raises NoSuchUpload."""

    @abstractmethod
    def presign_upload_part(
        self, key: str, upload_id: str, number: int, content_md5: str, ttl_seconds: int = DEFAULT_URL_TTL_SECONDS
    ) -> PresignedRequest:
        """A PUT of part ``number`` of an upload, bound to ``content_md5`` (base64): the store refuses
        any other body (a part sent again replaces the earlier one)."""

    @abstractmethod
    def complete_multipart(self, key: str, upload_id: str, parts: Sequence[tuple[int, str]]) -> ObjectInfo:
        """Assemble ``parts`` ((number, ETag as :meth:`list_parts` gives it: the hex MD5 unless opaque),
        ascending) into the object at ``key``, atomically for readers; its ETag is
        :func:`~smart_transfer.storage.digest.multipart_etag` of the MD5s (opaque where the parts' are). Raises
        MultipartRefused when a part is missing, differs from its MD5, or is too small; NoSuchUpload."""

    @abstractmethod
    def abort_multipart(self, key: str, upload_id: str) -> None:
        """Drop an upload and its parts; an unknown upload is not an error."""

    @abstractmethod
    def check_ready(self, timeout: float) -> None:
        """Raise StorageUnavailable unless the backend answers within ``timeout`` seconds (one try)."""

    def observe(self, observer: StoreObserver) -> None:  # noqa: B027 - optional hook
        """Report each call to the backend to ``observer`` (stores with a remote backend do)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections and files."""
