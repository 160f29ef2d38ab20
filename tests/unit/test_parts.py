"""How large objects are cut into parts (one rule for client and server), the ETag the parts make,
the parts' MD5s, and pages that keep one answer's part URLs bounded."""

from __future__ import annotations

import hashlib
import itertools
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from smart_transfer.protocol.messages import ObjectFile
from smart_transfer.storage.digest import multipart_etag, part_md5s
from smart_transfer.storage.parts import (
    MAX_OBJECT_BYTES,
    MAX_PART_BYTES,
    MAX_PARTS,
    MIB,
    MIN_PART_BYTES,
    layout,
    part_size_for,
)
from smart_transfer.transfer.mover import pages

MD5 = "1B2M2Y8AsgTpgAmY7PhCfg=="


@given(st.integers(1, MAX_OBJECT_BYTES), st.integers(MIN_PART_BYTES, MAX_PART_BYTES))
def test_parts_cover_the_object_within_s3s_limits(size: int, preferred: int) -> None:
    part_size = part_size_for(size, preferred)
    parts = layout(size, part_size)
    assert [p.number for p in parts] == list(range(1, len(parts) + 1))
    assert parts[0].offset == 0 and parts[-1].offset + parts[-1].length == size
    assert all(a.offset + a.length == b.offset for a, b in itertools.pairwise(parts))
    assert all(p.length == part_size for p in parts[:-1]) and 0 < parts[-1].length <= part_size
    assert len(parts) <= MAX_PARTS and part_size <= MAX_PART_BYTES
    assert part_size == preferred or part_size % MIB == 0


def test_the_part_size_grows_only_past_max_parts() -> None:
    assert part_size_for(10 * 1024 * MIB, 32 * MIB) == 32 * MIB  # 320 parts
    assert part_size_for(100 * 1024 * MIB, 32 * MIB) == 100 * MIB  # 1,024 parts of 100 MiB
    assert part_size_for(MAX_OBJECT_BYTES, MIN_PART_BYTES) == MAX_PART_BYTES
    with pytest.raises(ValueError, match="part size"):
        part_size_for(100, MIN_PART_BYTES - 1)


def test_the_multipart_etag_is_the_md5_of_the_part_md5s() -> None:
    parts = [hashlib.md5(b"a" * 10).hexdigest(), hashlib.md5(b"b").hexdigest()]
    joined = bytes.fromhex(parts[0]) + bytes.fromhex(parts[1])
    assert multipart_etag(parts) == hashlib.md5(joined).hexdigest() + "-2"


def test_part_md5s_hash_each_slice(tmp_path: Path) -> None:
    data = os.urandom(3 * MIB + 123)
    path = tmp_path / "object"
    path.write_bytes(data)
    parts = layout(len(data), MIB)
    assert part_md5s(path, parts) == [hashlib.md5(data[p.offset : p.offset + p.length]).hexdigest() for p in parts]


def _file(size: int, parts: int = 0) -> ObjectFile:
    return ObjectFile(kind="data", physical_hash="f1220" + "ab" * 32, size=size, part_md5s=[MD5] * parts or None)


def test_pages_hold_at_most_max_parts_in_all() -> None:
    files = [_file(1), _file(10, 600), _file(10, 600), _file(1), _file(10, MAX_PARTS), _file(1)]
    cut = pages(files, 1000)
    assert [len(page) for page in cut] == [2, 2, 2]
    assert all(sum(len(f.part_md5s or ()) for f in page) <= MAX_PARTS for page in cut)
    assert [len(page) for page in pages([_file(1)] * 5, 2)] == [2, 2, 1]
