"""Paged checkpoint manifests: a change rewrites the pages around it only, pages are canonical and
bounded, a tree that breaks a rule gives one clear error, format 1 is still read."""

from __future__ import annotations

import orjson
import pytest

from smart_transfer.model import InvalidBlock, Multihash
from smart_transfer.model.encoding import canonical_bytes
from smart_transfer.model.manifest import (
    CheckpointFile,
    CheckpointManifest,
    MissingPage,
    build_manifest,
    decode_manifest,
    pages_wanted,
)
from smart_transfer.model.manifest_delta import pages_to_send, shared_pages
from smart_transfer.model.manifest_pages import (
    MAX_LEVEL,
    MAX_PAGE_BYTES,
    MAX_PAGE_ENTRIES,
    PAGE_FORMAT,
    Page,
    PageEntry,
    PageSource,
    decode_page,
)
from tests.unit.test_published_formats import validator


def state_files(count: int, tag: str = "") -> list[CheckpointFile]:
    """A RocksDB-like checkpoint: numbered SST files and the small mutable files."""
    files = [CheckpointFile(f"{i:06d}.sst", Multihash.of(f"{tag}{i}".encode()), 1000 + i, True) for i in range(count)]
    files += [
        CheckpointFile(name, Multihash.of(f"{tag}{name}".encode()), 100, False)
        for name in ("CURRENT", "MANIFEST-000005", "OPTIONS-000007")
    ]
    return sorted(files, key=lambda f: f.name)


def ten_changed(files: list[CheckpointFile], count: int = 10) -> list[CheckpointFile]:
    """What a 10-row change does: 10 SST files all over the key space replaced by new ones, and
    RocksDB's MANIFEST rewritten."""
    ssts = [f for f in files if f.name.endswith(".sst")]
    dropped = {ssts[i].name for i in range(0, len(ssts), len(ssts) // count)[:count]}
    kept = [f for f in files if f.name not in dropped and not f.name.startswith("MANIFEST")]
    added = [CheckpointFile(f"{900000 + i:06d}.sst", Multihash.of(b"new%d" % i), 5000, True) for i in range(count)]
    added.append(CheckpointFile("MANIFEST-000009", Multihash.of(b"m9"), 120, False))
    return sorted(kept + added, key=lambda f: f.name)


def source_of(manifest: CheckpointManifest) -> dict[Multihash, bytes]:
    return dict(manifest.all_pages())


def test_paged_manifest_round_trips_and_pages_are_bounded() -> None:
    files = state_files(1024)
    manifest = build_manifest(files)
    assert len(manifest.pages) > 16  # a tree, not one object
    pages = source_of(manifest)
    decoded = decode_manifest(manifest.encode(), pages.get)
    assert decoded == manifest and list(decoded.files) == files
    for data in pages.values():
        page = decode_page(data)
        assert len(data) <= MAX_PAGE_BYTES and len(page.files or page.children) <= MAX_PAGE_ENTRIES
    assert build_manifest(files).hash() == manifest.hash()  # one set of files, one root


def new_page_bytes(count: int, change: int = 10) -> tuple[int, int]:
    """Bytes of the pages a change of ``change`` files adds to a checkpoint of ``count`` files, and
    the bytes of the whole format-1 manifest of the result."""
    files = state_files(count)
    before, after = build_manifest(files), build_manifest(ten_changed(files, change))
    old = source_of(before)
    new_pages = {h: d for h, d in after.all_pages() if h not in old}
    # what a sync sends once the receiver holds ``before``: exactly the new pages
    held = shared_pages((before.hash(), before.encode()), set(source_of(after)), old.get)
    assert pages_to_send([after], held) == new_pages
    return sum(len(d) for d in new_pages.values()), len(CheckpointManifest(after.files).encode())


def test_a_ten_file_change_rewrites_pages_proportional_to_it() -> None:
    small, small_whole = new_page_bytes(1024)
    large, large_whole = new_page_bytes(20_000)
    print(f"10 of 1,024 files: {small} of {small_whole} bytes; 10 of 20,000: {large} of {large_whole}")
    assert small < small_whole // 2
    assert large < large_whole // 20
    assert large < 2 * small  # flat in the checkpoint's size (a level or two more)
    assert new_page_bytes(1024, 100)[0] > 2 * small  # and growing with the change


def test_twenty_thousand_files_fit_and_decode() -> None:
    manifest = build_manifest(state_files(20_000))
    assert len(manifest.files) == 20_003
    assert decode_manifest(manifest.encode(), source_of(manifest).get).files == manifest.files
    assert decode_page(manifest.encode()).level <= 4


def test_format_one_manifests_are_still_read() -> None:
    files = tuple(state_files(50))
    old = CheckpointManifest(files)
    assert decode_manifest(old.encode()) == old
    assert old.all_pages() == [(old.hash(), old.encode())]
    assert pages_wanted(old.encode(), lambda _: None) == []


def test_a_missing_page_is_named_and_wanted() -> None:
    manifest = build_manifest(state_files(300))
    pages = source_of(manifest)
    entry = decode_page(manifest.encode()).children[1]
    child = entry.hash
    del pages[child]
    with pytest.raises(MissingPage, match=f"page {child} is missing") as caught:
        decode_manifest(manifest.encode(), pages.get)
    assert caught.value.page == child
    assert pages_wanted(manifest.encode(), pages.get) == [(child, entry.size)]


def _with_page(manifest: CheckpointManifest, index: int, data: bytes) -> tuple[bytes, PageSource]:
    """The manifest with the root's child ``index`` replaced by ``data`` (the root re-pointed at it)."""
    root = decode_page(manifest.encode())
    children = list(root.children)
    old = children[index]
    children[index] = PageEntry(Multihash.of(data), len(data), old.files, old.bytes)
    new_root = Page(root.level, children=tuple(children)).encode()
    pages = source_of(manifest)
    pages[Multihash.of(data)] = data
    return new_root, pages.get


def _leaf(files: list[CheckpointFile]) -> bytes:
    return canonical_bytes({"format": PAGE_FORMAT, "level": 0, "files": [f.to_dict() for f in files]})


def test_malformed_trees_give_one_clear_error() -> None:
    manifest = build_manifest(state_files(40))
    root = decode_page(manifest.encode())
    assert root.level == 1 and len(root.children) > 2
    first = root.children[0]
    pages = source_of(manifest)
    leaf = decode_page(pages[first.hash])

    swapped = dict(pages)
    swapped[first.hash] = pages[root.children[1].hash]  # bytes that do not hash to the name
    with pytest.raises(InvalidBlock, match="does not match its hash"):
        decode_manifest(manifest.encode(), swapped.get)

    unsorted = _leaf([leaf.files[1], leaf.files[0], *leaf.files[2:]])
    with pytest.raises(InvalidBlock, match="unique and sorted"):
        decode_manifest(*_with_page(manifest, 0, unsorted))

    # a page listing another page of its own level: levels must fall, so no cycle and no deep tree
    same_level = Page(1, children=(root.children[1],)).encode()
    with pytest.raises(InvalidBlock, match="at level 1, expected 0"):
        decode_manifest(*_with_page(manifest, 0, same_level))

    recount = Page(0, files=leaf.files[:-1]).encode()  # a leaf that drops a file its parent counts
    with pytest.raises(InvalidBlock, match="does not hold the files its parent counts"):
        decode_manifest(*_with_page(manifest, 0, recount))

    moved = list(manifest.files)  # valid pages, but not split where the format splits them
    resplit = Page(1, children=_entries([moved[:3], moved[3:]], pages)).encode()
    with pytest.raises(InvalidBlock, match="not split where the format splits"):
        decode_manifest(resplit, pages.get)


def _entries(chunks: list[list[CheckpointFile]], pages: dict[Multihash, bytes]) -> tuple[PageEntry, ...]:
    out = []
    for chunk in chunks:
        data = _leaf(chunk)
        pages[Multihash.of(data)] = data
        out.append(PageEntry(Multihash.of(data), len(data), len(chunk), sum(f.size for f in chunk)))
    return tuple(out)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{" + b" " * MAX_PAGE_BYTES + b"}", "exceeds"),
        (canonical_bytes({"format": PAGE_FORMAT, "level": MAX_LEVEL + 1, "pages": []}), "at most"),
        (canonical_bytes({"format": PAGE_FORMAT, "level": 1, "pages": []}), "1 to 256 entries"),
        (canonical_bytes({"format": PAGE_FORMAT, "level": 0, "files": [], "x": 1}), "unknown field"),
        (_leaf([]).replace(b":", b": ", 1), "canonical"),
    ],
)
def test_malformed_pages_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(InvalidBlock, match=message):
        decode_page(data)


def test_every_page_fits_the_published_schema() -> None:
    manifest = build_manifest(state_files(2000))
    checked = validator("CheckpointManifestPage")
    levels = set()
    for _, data in manifest.all_pages():
        assert list(checked.iter_errors(orjson.loads(data))) == []
        levels.add(decode_page(data).level)
    assert 0 in levels and max(levels) >= 2  # leaves and inner pages both checked
    broken = orjson.loads(manifest.all_pages()[-1][1])
    broken["level"] = 1  # a leaf that claims to be an inner page
    assert list(checked.iter_errors(broken)) != []
