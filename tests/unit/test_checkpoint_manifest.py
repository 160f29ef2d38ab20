"""Checkpoint manifests: canonical, strict, safe file names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from smart_transfer.model import InvalidBlock, Multihash
from smart_transfer.model.manifest import CheckpointFile, CheckpointManifest, decode_manifest, is_immutable

names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,30}", fullmatch=True)
files = st.builds(
    lambda name, data, flag: CheckpointFile(name, Multihash.of(data), len(data), flag),
    names,
    st.binary(max_size=20),
    st.booleans(),
)


@given(st.lists(files, max_size=10, unique_by=lambda f: f.name))
def test_manifests_round_trip(entries: list[CheckpointFile]) -> None:
    manifest = CheckpointManifest(tuple(sorted(entries, key=lambda f: f.name)))
    assert decode_manifest(manifest.encode()) == manifest
    assert manifest.hash() == Multihash.of(manifest.encode())


@pytest.mark.parametrize("name", ["../escape", "/abs", "a/b", ".hidden", "", "x" * 300, "a\0b"])
def test_unsafe_file_names_are_refused(name: str) -> None:
    raw = CheckpointManifest((CheckpointFile(name, Multihash.of(b"x"), 1, False),)).encode()
    with pytest.raises(InvalidBlock, match="unsafe file name"):
        decode_manifest(raw)


def test_unsorted_duplicate_or_noncanonical_manifests_are_refused() -> None:
    a = CheckpointFile("a.sst", Multihash.of(b"a"), 1, True)
    b = CheckpointFile("b", Multihash.of(b"b"), 1, False)
    with pytest.raises(InvalidBlock, match="sorted"):
        decode_manifest(CheckpointManifest((b, a)).encode())
    with pytest.raises(InvalidBlock, match="sorted"):
        decode_manifest(CheckpointManifest((a, a)).encode())
    with pytest.raises(InvalidBlock, match="canonical"):
        decode_manifest(CheckpointManifest((a,)).encode().replace(b",", b", ", 1))


def test_only_sst_and_blob_files_are_immutable() -> None:
    assert is_immutable("000009.sst") and is_immutable("000010.blob")
    assert not any(is_immutable(n) for n in ("CURRENT", "MANIFEST-000005", "OPTIONS-000007", "000008.log"))
