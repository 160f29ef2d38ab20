"""Multihashes written as multibase base16 text (``f`` + varint code + varint length + digest).

sha2-256 (code 0x12) is the default so that S3 and Git LFS tooling can check objects; sha3-256
(code 0x16) is accepted because Open Data Fabric uses it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from smart_transfer.model.errors import InvalidMultihash

SHA2_256 = 0x12
SHA3_256 = 0x16

#: Supported hash functions: multicodec code -> (name for hashlib, digest length in bytes).
_ALGORITHMS: dict[int, tuple[str, int]] = {SHA2_256: ("sha256", 32), SHA3_256: ("sha3_256", 32)}
#: Their constructors, called directly: hashing 100,000 blocks must not pay hashlib.new's lookup each time.
_CONSTRUCTORS: dict[int, Callable[[bytes], Hasher]] = {SHA2_256: hashlib.sha256, SHA3_256: hashlib.sha3_256}
#: The binary form's length: code and length bytes, then the digest (32 bytes for both codes).
BINARY_LENGTH = 2 + 32
#: Both codes and both lengths fit one varint byte, so every supported multihash has this text length.
TEXT_LENGTH = 1 + 2 + 2 + 64
#: The text form of a supported multihash: multibase base16 (f), code 0x12 or 0x16, length 0x20, digest.
HASH_PATTERN = r"^f1[26]20[0-9a-f]{64}$"


class Hasher(Protocol):
    """The part of a hashlib object a streaming hasher needs."""

    def update(self, data: bytes, /) -> None: ...

    def digest(self) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Multihash:
    """A content hash with its hash function code."""

    code: int
    digest: bytes
    #: The text form, kept once known: a 100,000-block chain turns hashes into text (keys, JSON,
    #: messages) several times per block.
    _text: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        algorithm = _ALGORITHMS.get(self.code)
        if algorithm is None:
            raise InvalidMultihash(f"unsupported multihash code 0x{self.code:x}")
        if len(self.digest) != algorithm[1]:
            raise InvalidMultihash(f"digest of {len(self.digest)} bytes, expected {algorithm[1]}")

    @classmethod
    def of(cls, data: bytes, code: int = SHA2_256) -> Multihash:
        """The multihash of ``data``."""
        constructor = _CONSTRUCTORS.get(code)
        if constructor is None:
            raise InvalidMultihash(f"unsupported multihash code 0x{code:x}")
        return cls(code, constructor(data).digest())

    @classmethod
    def from_bytes(cls, raw: bytes) -> Multihash:
        """Parse the binary form: code, length, digest (one byte each for the supported codes)."""
        if len(raw) < 2 or raw[1] != len(raw) - 2:
            raise InvalidMultihash(f"not a binary multihash: {raw[:8].hex()}... ({len(raw)} bytes)")
        return cls(raw[0], raw[2:])

    def to_bytes(self) -> bytes:
        """The binary form (``BINARY_LENGTH`` bytes for the supported codes)."""
        return bytes((self.code, len(self.digest))) + self.digest

    @classmethod
    def parse(cls, text: str) -> Multihash:
        """Parse multibase base16 text such as ``f1220<64 hex>``; raise InvalidMultihash otherwise."""
        if not isinstance(text, str):
            raise InvalidMultihash("a multihash must be text")
        raw = b""
        if len(text) == TEXT_LENGTH and text[0] == "f":
            try:  # not contextlib.suppress: parsing 100,000 hashes must not pay for a context manager
                raw = bytes.fromhex(text[1:])
            except ValueError:
                raw = b""  # refused below
        # lowercase hex only: fromhex also takes uppercase and skips whitespace, hex() writes neither
        if len(raw) != BINARY_LENGTH or raw.hex() != text[1:]:
            shown = text if len(text) <= 80 else text[:77] + "..."
            raise InvalidMultihash(f"not a multihash: {shown!r} (expected 'f1220' or 'f1620' + 64 hex digits)")
        if raw[1] != len(raw) - 2:
            raise InvalidMultihash(f"multihash length byte {raw[1]} does not match {len(raw) - 2} digest bytes")
        return cls(raw[0], raw[2:], text)

    def __str__(self) -> str:
        if not self._text:
            object.__setattr__(self, "_text", "f" + bytes((self.code, len(self.digest))).hex() + self.digest.hex())
        return self._text

    def __repr__(self) -> str:
        return f"Multihash({str(self)!r})"

    def matches(self, data: bytes) -> bool:
        """Whether ``data`` hashes to this multihash."""
        return _CONSTRUCTORS[self.code](data).digest() == self.digest


def new_hasher(code: int = SHA2_256) -> Hasher:
    """A streaming hasher for ``code``; finish with ``Multihash(code, hasher.digest())``."""
    constructor = _CONSTRUCTORS.get(code)
    if constructor is None:
        raise InvalidMultihash(f"unsupported multihash code 0x{code:x}")
    return constructor(b"")


def hash_text(value: Multihash | None) -> str | None:
    """The text form of an optional hash (messages and reports carry None as null)."""
    return str(value) if value is not None else None
