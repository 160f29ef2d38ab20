"""Every checksum the project computes over object bytes, in one place: the multihash that names an
object, and the MD5 that S3 checks (``Content-MD5``, base64) and reports (ETag, hex)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from smart_transfer.model import Multihash
from smart_transfer.model.multihash import SHA2_256, new_hasher
from smart_transfer.storage.parts import Part

#: Read size when hashing files.
HASH_CHUNK_BYTES = 1024 * 1024


def md5_base64(data: bytes) -> str:
    """The ``Content-MD5`` header value (base64 of the raw digest) of ``data``."""
    return base64.b64encode(hashlib.md5(data).digest()).decode("ascii")


def md5_hex_from_base64(content_md5: str) -> str:
    """A ``Content-MD5`` header value in the hex form S3 uses in ETags; ValueError if malformed."""
    try:
        raw = base64.b64decode(content_md5, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("Content-MD5 is not base64") from None
    if len(raw) != 16:
        raise ValueError("Content-MD5 must be 16 bytes base64-encoded")
    return raw.hex()


def md5_base64_from_hex(md5_hex: str) -> str:
    """The ``Content-MD5`` header value of a hex MD5 (an ETag)."""
    return base64.b64encode(bytes.fromhex(md5_hex)).decode("ascii")


def multipart_etag(part_md5_hex: Sequence[str]) -> str:
    """The ETag S3 gives an object assembled from parts with these MD5s (hex, in part order): the MD5
    of the parts' binary MD5s, a dash and the number of parts. It is not the MD5 of the object, but
    it names exactly these parts in this order."""
    joined = b"".join(bytes.fromhex(md5) for md5 in part_md5_hex)
    return f"{hashlib.md5(joined).hexdigest()}-{len(part_md5_hex)}"


def part_md5s(path: Path, parts: Sequence[Part], workers: int | None = None) -> list[str]:
    """The MD5 (hex) of each part of the file at ``path``, parts hashed in parallel threads (hashlib
    releases the GIL on large buffers, so a large object hashes on every core)."""

    def one(part: Part) -> str:
        digest = hashlib.md5()
        with open(path, "rb") as src:
            src.seek(part.offset)
            remaining = part.length
            while remaining > 0:
                chunk = src.read(min(HASH_CHUNK_BYTES, remaining))
                if not chunk:
                    raise ValueError(f"{path} is shorter than its part {part.number} expects")
                digest.update(chunk)
                remaining -= len(chunk)
        return digest.hexdigest()

    with ThreadPoolExecutor(max_workers=workers or min(len(parts), os.cpu_count() or 1)) as pool:
        return list(pool.map(one, parts))


def content_mismatch(expected: Multihash, expected_size: int, actual: Multihash, actual_size: int) -> str | None:
    """The check every reader applies to an object's bytes: they are ``expected_size`` long and hash to
    ``expected``. Why bytes of ``actual_size`` hashing to ``actual`` are not that object (one line), or
    None when they are."""
    if actual_size != expected_size:
        return f"{actual_size} bytes, expected {expected_size}"
    if actual != expected:
        return "content does not match its hash"
    return None


def bytes_mismatch(data: bytes, expected: Multihash, expected_size: int) -> str | None:
    """:func:`content_mismatch` of bytes in memory (hashed only when their size is right)."""
    if len(data) != expected_size:
        return content_mismatch(expected, expected_size, expected, len(data))
    return content_mismatch(expected, expected_size, Multihash.of(data, expected.code), len(data))


class FileDigest(NamedTuple):
    """Content address, size and MD5 (hex) of some bytes."""

    multihash: Multihash
    size: int
    md5_hex: str

    @property
    def md5_base64(self) -> str:
        """The MD5 as a ``Content-MD5`` header value."""
        return md5_base64_from_hex(self.md5_hex)

    def mismatch(self, expected: Multihash, expected_size: int) -> str | None:
        """:func:`content_mismatch` of these bytes against the object they should be."""
        return content_mismatch(expected, expected_size, self.multihash, self.size)


class Digester:
    """Hashes bytes as they stream past (multihash, MD5 and size at once)."""

    def __init__(self, code: int = SHA2_256) -> None:
        self.code = code
        self._hasher = new_hasher(code)
        self._md5 = hashlib.md5()
        self.size = 0

    def update(self, chunk: bytes) -> None:
        """Hash the next ``chunk``."""
        self._hasher.update(chunk)
        self._md5.update(chunk)
        self.size += len(chunk)

    def result(self) -> FileDigest:
        """The digest of every chunk so far."""
        return FileDigest(Multihash(self.code, self._hasher.digest()), self.size, self._md5.hexdigest())


def digest_chunks(chunks: Iterable[bytes], code: int = SHA2_256) -> FileDigest:
    """The digest of a stream of chunks."""
    digester = Digester(code)
    for chunk in chunks:
        digester.update(chunk)
    return digester.result()


def digest_file(path: Path, code: int = SHA2_256) -> FileDigest:
    """Read ``path`` once, computing its multihash, size and MD5."""
    with open(path, "rb") as src:
        return digest_chunks(iter(lambda: src.read(HASH_CHUNK_BYTES), b""), code)
