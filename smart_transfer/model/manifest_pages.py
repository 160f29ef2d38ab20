"""Pages of a paged checkpoint manifest (format ``rocksdb-checkpoint/2``): a tree addressed by hash.

A **leaf** page (level 0) lists files; an **inner** page (level n > 0) lists pages of level n - 1 by
hash, with each one's size in bytes and the number and total size of the files under it. The root
is the page a block's checkpoint reference names; the other pages are objects of kind
'checkpoints' like the files.

Page boundaries are chosen by content, as in a prolly tree: a leaf ends after a file whose name
hashes to ``BOUNDARY_BITS`` low zero bits (or at ``MAX_PAGE_ENTRIES``), an inner page after a child
whose page hash does, never before ``MIN_SPLIT`` entries (so every level is at most about half the
one below and the tree always ends in one root). Adding, removing or changing a few files therefore
rewrites only the leaves that hold them and the pages above those, about one leaf per changed file
plus the path up; every other page keeps its hash and is shared with the parent checkpoint. The
split is part of the format: a tree whose pages are not split this way is refused, so one set of
files has one root.

Each page is canonical and bounded like a block (``MAX_PAGE_BYTES``, ``MAX_PAGE_ENTRIES``); levels
strictly decrease from the root (``MAX_LEVEL``), so a tree has no cycle and a bounded depth.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from msgspec import Struct

from smart_transfer.model.encoding import canonical_bytes, decode_object
from smart_transfer.model.errors import InvalidBlock
from smart_transfer.model.fields import get_hash, get_int, require_keys
from smart_transfer.model.manifest_file import CheckpointFile, check_sorted, parse_file
from smart_transfer.model.multihash import Multihash

PAGE_FORMAT = "rocksdb-checkpoint/2"
#: Average entries per page is about 2**BOUNDARY_BITS + 1: small pages keep a change's cost small
#: (a changed file rewrites its leaf, about 1-2 KiB, and the pages above it) while a tree has about
#: one page per 8 files and stays shallow (4 levels at 20,000 files, 7 at a million). Measured: 10
#: files changed among 1,024 rewrite about 45 KB of pages (the whole list is 143 KB); among 20,000,
#: about 60 KB (of 2.8 MB).
BOUNDARY_BITS = 3
_MASK = (1 << BOUNDARY_BITS) - 1
#: A page never splits before this many entries (so each level at least halves).
MIN_SPLIT = 2
#: A page always splits at this many entries (a run of names that never hits a boundary).
MAX_PAGE_ENTRIES = 256
#: A full page of the longest names fits well within this.
MAX_PAGE_BYTES = 256 * 1024
#: Levels halve at least, so 2**MAX_LEVEL pages exceed any tree of MAX_CHECKPOINT_FILES files.
MAX_LEVEL = 24
#: The most files one checkpoint may list. Not a format limit (pages are bounded, the tree is not):
#: every reader holds a checkpoint's whole file list in memory (about 300 bytes per file: 150 MB here),
#: and a first push or pull carries every page in one metadata tarball (about 150 bytes and 1/8 of a
#: page per file: 75 MB and some 62,000 entries, within the tarball's 1 GiB and 100,000 entries). A
#: RocksDB state of 1 TiB in 64 MiB SST files has about 16,000 files; in 2 MiB files, 500,000.
MAX_CHECKPOINT_FILES = 500_000

#: Where a reader finds a page by hash: a tarball, its own store, or both (None: not there).
PageSource = Callable[[Multihash], bytes | None]
_T = TypeVar("_T")


class MissingPage(InvalidBlock):
    """A page the tree names that neither the bundle nor the store holds."""

    def __init__(self, page: Multihash) -> None:
        super().__init__(f"page {page} is missing")
        self.page = page


class PageEntry(Struct, frozen=True):
    """A child page as its parent lists it."""

    hash: Multihash
    size: int
    files: int
    bytes: int

    def to_dict(self) -> dict[str, Any]:
        """The entry's JSON form."""
        return {"hash": str(self.hash), "size": self.size, "files": self.files, "bytes": self.bytes}


class Page(Struct, frozen=True):
    """One decoded page: files (level 0) or child pages (level > 0)."""

    level: int
    files: tuple[CheckpointFile, ...] = ()
    children: tuple[PageEntry, ...] = ()

    def encode(self) -> bytes:
        """The page's canonical bytes."""
        if self.level == 0:
            return canonical_bytes({"format": PAGE_FORMAT, "level": 0, "files": [f.to_dict() for f in self.files]})
        children = [c.to_dict() for c in self.children]
        return canonical_bytes({"format": PAGE_FORMAT, "level": self.level, "pages": children})

    @property
    def file_count(self) -> int:
        """Files under this page."""
        return len(self.files) if self.level == 0 else sum(c.files for c in self.children)

    @property
    def file_bytes(self) -> int:
        """Total size of the files under this page."""
        return sum(f.size for f in self.files) if self.level == 0 else sum(c.bytes for c in self.children)


def is_page(obj: dict[str, Any]) -> bool:
    """Whether a decoded manifest object is a page of this format (else it is format 1)."""
    return obj.get("format") == PAGE_FORMAT


def _entries(obj: dict[str, Any], key: str, where: str, least: int) -> list[Any]:
    entries = obj[key]
    if not isinstance(entries, list) or not least <= len(entries) <= MAX_PAGE_ENTRIES:
        raise InvalidBlock(f"{where}.{key}: expected a list of {least} to {MAX_PAGE_ENTRIES} entries")
    return entries


def _child(entry: Any, where: str) -> PageEntry:
    if not isinstance(entry, dict):
        raise InvalidBlock(f"{where}: expected an object")
    require_keys(entry, where, {"hash", "size", "files", "bytes"})
    size = get_int(entry, "size", where, minimum=1)
    if size > MAX_PAGE_BYTES:
        raise InvalidBlock(f"{where}.size: a page is at most {MAX_PAGE_BYTES} bytes")
    return PageEntry(
        get_hash(entry, "hash", where), size, get_int(entry, "files", where, minimum=1), get_int(entry, "bytes", where)
    )


def decode_page(data: bytes, obj: dict[str, Any] | None = None) -> Page:
    """One page from its bytes (``obj``: their decoded form, when the caller has it); InvalidBlock for
    anything malformed: too large, not canonical, unknown fields, unsafe or unsorted names."""
    if len(data) > MAX_PAGE_BYTES:
        raise InvalidBlock(f"manifest page of {len(data)} bytes exceeds {MAX_PAGE_BYTES}")
    obj = decode_object(data) if obj is None else obj
    level = obj.get("level")
    leaf = level == 0
    require_keys(obj, "page", {"format", "level", "files" if leaf else "pages"})
    if not is_page(obj):
        raise InvalidBlock(f"page.format: expected {PAGE_FORMAT!r}")
    level = get_int(obj, "level", "page")
    if level > MAX_LEVEL:
        raise InvalidBlock(f"page.level: at most {MAX_LEVEL}")
    if leaf:
        files = tuple(parse_file(e, f"page.files[{i}]") for i, e in enumerate(_entries(obj, "files", "page", 0)))
        check_sorted(files, "page.files")
        page = Page(0, files=files)
    else:
        children = _entries(obj, "pages", "page", 1)
        page = Page(level, children=tuple(_child(e, f"page.pages[{i}]") for i, e in enumerate(children)))
    if page.encode() != data:
        raise InvalidBlock("manifest page bytes are not in canonical form")
    return page


def _name_boundary(item: CheckpointFile) -> bool:
    digest = hashlib.blake2b(item.name.encode(), digest_size=4).digest()
    return int.from_bytes(digest) & _MASK == 0


def _page_boundary(item: PageEntry) -> bool:
    return int.from_bytes(item.hash.digest[-4:]) & _MASK == 0


def _split(items: Sequence[_T], boundary: Callable[[_T], bool]) -> list[list[_T]]:
    """``items`` cut after each boundary item (content-defined), within MIN_SPLIT..MAX_PAGE_ENTRIES."""
    pages: list[list[_T]] = []
    current: list[_T] = []
    for item in items:
        current.append(item)
        if len(current) >= MAX_PAGE_ENTRIES or (len(current) >= MIN_SPLIT and boundary(item)):
            pages.append(current)
            current = []
    if current or not pages:
        pages.append(current)
    return pages


def _entry_of(page: Page, out: list[tuple[Multihash, bytes]]) -> PageEntry:
    data = page.encode()
    address = Multihash.of(data)
    out.append((address, data))
    return PageEntry(address, len(data), page.file_count, page.file_bytes)


def build_pages(files: Sequence[CheckpointFile]) -> list[tuple[Multihash, bytes]]:
    """The pages of the tree listing ``files`` (sorted by name), root first."""
    levels: list[list[tuple[Multihash, bytes]]] = [[]]
    entries = [_entry_of(Page(0, files=tuple(chunk)), levels[0]) for chunk in _split(files, _name_boundary)]
    while len(entries) > 1:
        levels.append([])
        chunks = _split(entries, _page_boundary)
        entries = [_entry_of(Page(len(levels) - 1, children=tuple(c)), levels[-1]) for c in chunks]
    return [page for level in reversed(levels) for page in level]


def _fetch_child(entry: PageEntry, data: bytes, parent: Page) -> Page:
    """A child page checked against what its parent says of it."""
    if len(data) != entry.size or not entry.hash.matches(data):
        raise InvalidBlock(f"page {entry.hash} does not match its hash and size")
    page = decode_page(data)
    if page.level != parent.level - 1:
        raise InvalidBlock(f"page {entry.hash} is at level {page.level}, expected {parent.level - 1}")
    if (page.file_count, page.file_bytes) != (entry.files, entry.bytes):
        raise InvalidBlock(f"page {entry.hash} does not hold the files its parent counts")
    return page


def _next_level(level: list[Page], source: PageSource, found: list[tuple[Multihash, bytes]]) -> list[Page]:
    below = []
    for parent in level:
        for entry in parent.children:
            data = source(entry.hash)
            if data is None:
                raise MissingPage(entry.hash)
            below.append(_fetch_child(entry, data, parent))
            found.append((entry.hash, data))
    return below


def resolve_tree(
    root_hash: Multihash, root: Page, root_data: bytes, source: PageSource
) -> tuple[list[CheckpointFile], list[tuple[Multihash, bytes]]]:
    """Every file under ``root`` (sorted, checked) and every page of its tree (root first), the pages
    below it read from ``source``. MissingPage when one is in neither; InvalidBlock when a page does
    not match its hash, its parent's counts or level, or the tree is not split as the format splits."""
    if root.file_count > MAX_CHECKPOINT_FILES:
        raise InvalidBlock(f"manifest lists {root.file_count} files, more than {MAX_CHECKPOINT_FILES}")
    pages = [(root_hash, root_data)]
    level = [root]
    while level[0].level > 0:
        level = _next_level(level, source, pages)
    files = [f for page in level for f in page.files]
    check_sorted(files, "manifest.files")
    if build_pages(files)[0][0] != root_hash:
        raise InvalidBlock("manifest pages are not split where the format splits them")
    return files, pages


def wanted_pages(root: Page, source: PageSource) -> list[PageEntry]:
    """Pages of the tree under ``root`` that ``source`` lacks and no lacking page hides (what a reader
    fetches next, level by level); each page found is checked as ``resolve_tree`` does."""
    wanted: list[PageEntry] = []
    level = [root]
    while level and level[0].level > 0:
        below = []
        for parent in level:
            for entry in parent.children:
                data = source(entry.hash)
                if data is None:
                    wanted.append(entry)
                else:
                    below.append(_fetch_child(entry, data, parent))
        level = below
    return wanted
