"""The checkpoint manifest: every file of a RocksDB checkpoint with its hash, size and mutability.
Pure: canonical encoding like blocks, so a manifest's address is the hash of its bytes. Every path
(pull, push, commit, verify, gc, restore, ingest) reads manifests through ``decode_manifest``.

Two formats are read:

- ``rocksdb-checkpoint/1`` (``FORMAT``): one object listing every file, at most ``MAX_FILES`` files
  and ``MAX_MANIFEST_BYTES``. Repositories written before paged manifests hold these.
- ``rocksdb-checkpoint/2`` (``manifest_pages.PAGE_FORMAT``, what ``build_manifest`` writes): a tree
  of pages addressed by hash, whose root is the manifest object; a new checkpoint shares every page
  its changes do not touch with its parent, so a sync moves the pages that differ. The limit now is
  ``MAX_CHECKPOINT_FILES`` (500,000 files; see ``manifest_pages`` for why), not the format.
"""

from __future__ import annotations

from msgspec import Struct

from smart_transfer.model.encoding import canonical_bytes, decode_object
from smart_transfer.model.errors import InvalidBlock
from smart_transfer.model.fields import require_keys
from smart_transfer.model.manifest_file import (
    FILE_NAME_PATTERN,
    CheckpointFile,
    check_sorted,
    is_immutable,
    parse_file,
)
from smart_transfer.model.manifest_pages import (
    MAX_CHECKPOINT_FILES,
    PAGE_FORMAT,
    MissingPage,
    PageSource,
    build_pages,
    decode_page,
    is_page,
    resolve_tree,
    wanted_pages,
)
from smart_transfer.model.multihash import Multihash

__all__ = [
    "FILE_NAME_PATTERN",
    "FORMAT",
    "MAX_CHECKPOINT_FILES",
    "MAX_FILES",
    "MAX_MANIFEST_BYTES",
    "PAGE_FORMAT",
    "CheckpointFile",
    "CheckpointManifest",
    "MissingPage",
    "PageSource",
    "build_manifest",
    "decode_manifest",
    "is_immutable",
    "no_pages",
    "pages_wanted",
]

FORMAT = "rocksdb-checkpoint/1"
#: Format-1 manifests (and every page) are metadata: bounded like blocks are.
MAX_MANIFEST_BYTES = 1024 * 1024
#: The most files a format-1 manifest lists (a paged one: MAX_CHECKPOINT_FILES).
MAX_FILES = 10_000


class CheckpointManifest(Struct, frozen=True):
    """The files of one checkpoint, sorted by name, and (paged format) every page of its tree, root
    first; a format-1 manifest has no pages."""

    files: tuple[CheckpointFile, ...]
    pages: tuple[tuple[Multihash, bytes], ...] = ()

    def encode(self) -> bytes:
        """The manifest object's bytes: the root page, or the whole format-1 manifest."""
        if self.pages:
            return self.pages[0][1]
        return canonical_bytes({"format": FORMAT, "files": [f.to_dict() for f in self.files]})

    def hash(self) -> Multihash:
        """The manifest's address (what a block's checkpoint reference names)."""
        return self.pages[0][0] if self.pages else Multihash.of(self.encode())

    def all_pages(self) -> list[tuple[Multihash, bytes]]:
        """Every object that makes up the manifest, root first (a format-1 manifest: itself)."""
        return list(self.pages) if self.pages else [(self.hash(), self.encode())]


def build_manifest(files: tuple[CheckpointFile, ...] | list[CheckpointFile]) -> CheckpointManifest:
    """The paged manifest of ``files`` (sorted by name, as a directory listing sorts them)."""
    ordered = tuple(files)
    check_sorted(ordered, "manifest.files")
    if len(ordered) > MAX_CHECKPOINT_FILES:
        raise InvalidBlock(f"a checkpoint of {len(ordered)} files exceeds {MAX_CHECKPOINT_FILES}")
    return CheckpointManifest(ordered, tuple(build_pages(ordered)))


def no_pages(_: Multihash) -> bytes | None:
    """A page source that holds nothing (a manifest that must be self-contained)."""
    return None


def decode_manifest(data: bytes, source: PageSource = no_pages) -> CheckpointManifest:
    """Parse manifest bytes, the pages below a paged manifest's root read from ``source``; raises
    InvalidBlock for anything malformed (unsafe names, unsorted, oversized, not canonical, a page that
    does not match its hash), MissingPage (an InvalidBlock) for a page ``source`` lacks."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise InvalidBlock(f"checkpoint manifest of {len(data)} bytes exceeds {MAX_MANIFEST_BYTES}")
    obj = decode_object(data)
    if is_page(obj):
        root = decode_page(data, obj)
        files, pages = resolve_tree(Multihash.of(data), root, data, source)
        return CheckpointManifest(tuple(files), tuple(pages))
    return _decode_format1(data, obj)


def _decode_format1(data: bytes, obj: dict[str, object]) -> CheckpointManifest:
    require_keys(obj, "manifest", {"format", "files"})
    if obj["format"] != FORMAT:
        raise InvalidBlock(f"manifest.format: expected {FORMAT!r} or {PAGE_FORMAT!r}")
    entries = obj["files"]
    if not isinstance(entries, list) or len(entries) > MAX_FILES:
        raise InvalidBlock(f"manifest.files: expected a list of at most {MAX_FILES} files")
    files = tuple(parse_file(entry, f"manifest.files[{i}]") for i, entry in enumerate(entries))
    check_sorted(files, "manifest.files")
    manifest = CheckpointManifest(files)
    if manifest.encode() != data:
        raise InvalidBlock("manifest bytes are not in canonical form")
    return manifest


def pages_wanted(data: bytes, source: PageSource) -> list[tuple[Multihash, int]]:
    """The pages (hash, size) below the manifest ``data`` that ``source`` lacks and no lacking page
    hides: what a reader fetching pages one by one, or repairing them, asks for next (none for a
    format-1 manifest)."""
    obj = decode_object(data)
    if not is_page(obj):
        return []
    return [(entry.hash, entry.size) for entry in wanted_pages(decode_page(data, obj), source)]
