"""The rules with one owner each: a stored object against its promise, bytes against their address."""

from __future__ import annotations

import hashlib

from smart_transfer.model import DatasetName, Multihash
from smart_transfer.repo.layout import ObjectKind, hash_of_key, object_key, pack_key
from smart_transfer.storage.base import ObjectInfo, UploadedPart, stored_as_promised, stored_mismatch
from smart_transfer.storage.digest import bytes_mismatch, content_mismatch, digest_chunks

DATA = b"some object bytes"
MD5 = hashlib.md5(DATA).hexdigest()


def test_a_stored_object_must_have_the_promised_size_and_etag() -> None:
    info = ObjectInfo("ds/data/x", len(DATA), MD5)
    assert stored_mismatch(info, len(DATA), MD5) is None
    assert stored_mismatch(info, len(DATA)) is None  # size alone when no ETag was promised
    assert stored_mismatch(None, len(DATA), MD5) == "missing"
    assert stored_mismatch(info, len(DATA) + 1, MD5) == f"{len(DATA)} bytes, expected {len(DATA) + 1}"
    assert stored_mismatch(info, len(DATA), "0" * 32) == "content does not match the promised MD5"
    assert stored_as_promised(UploadedPart(1, 5, MD5), 5, MD5)
    assert not stored_as_promised(UploadedPart(1, 5, MD5), 6, MD5)


def test_bytes_must_have_the_expected_size_and_hash() -> None:
    address = Multihash.of(DATA)
    assert bytes_mismatch(DATA, address, len(DATA)) is None
    assert bytes_mismatch(DATA[:-1], address, len(DATA)) == f"{len(DATA) - 1} bytes, expected {len(DATA)}"
    assert bytes_mismatch(DATA[::-1], address, len(DATA)) == "content does not match its hash"
    digest = digest_chunks([DATA[:4], DATA[4:]])
    assert digest.mismatch(address, len(DATA)) is None
    assert content_mismatch(address, len(DATA), Multihash.of(b"other"), len(DATA)) == "content does not match its hash"


def test_keys_name_their_hash() -> None:
    address = Multihash.of(DATA)
    assert hash_of_key(object_key(DatasetName("ds"), ObjectKind.DATA, address)) == address
    assert hash_of_key(pack_key(DatasetName("ds"), address)) == address
    assert hash_of_key("ds/refs/head") is None
