"""Metadata tarballs: the blocks as one block pack (``pack-{pack hash}``, see ``model/pack.py``),
followed by the checkpoint manifests those blocks reference (``manifest-{hash}``), in one gzip tar
sent as a single binary frame. Unpacking is bounded against hostile input."""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Iterable

from msgspec import Struct, field

from smart_transfer.model import InvalidMultihash, ModelError, Multihash
from smart_transfer.model.manifest import MAX_MANIFEST_BYTES
from smart_transfer.model.pack import decode_pack, encode_pack, max_pack_bytes
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import InvalidBlocksDetails, ProtocolError

#: Most blocks one tarball may carry.
DEFAULT_MAX_BLOCKS = 1_000_000
#: Most bytes a tarball may expand to (guards against decompression bombs).
DEFAULT_MAX_EXPANDED_BYTES = 1024 * 1024 * 1024
#: Most checkpoint manifests one tarball may carry.
MAX_MANIFESTS = 100_000
#: gzip level: fast; blocks are small JSON that compresses well even at level 1.
COMPRESSION_LEVEL = 1
#: A tar header, and the unit entries are padded to.
TAR_BLOCK = 512


PACK_PREFIX = "pack-"
MANIFEST_PREFIX = "manifest-"


class MetadataBundle(Struct):
    """What a tarball carries: blocks in order, and checkpoint manifests by hash."""

    blocks: list[tuple[Multihash, bytes]] = field(default_factory=list)
    manifests: dict[Multihash, bytes] = field(default_factory=dict)
    #: The pack the blocks came in (its address and bytes).
    pack: tuple[Multihash, bytes] | None = None


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def pack_blocks(blocks: Iterable[tuple[Multihash, bytes]], manifests: Iterable[tuple[Multihash, bytes]] = ()) -> bytes:
    """One gzip tar of the pack of ``blocks`` (oldest first), then ``manifests``."""
    pack = encode_pack(blocks)
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=COMPRESSION_LEVEL, mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tar,
    ):
        _add(tar, f"{PACK_PREFIX}{Multihash.of(pack)}", pack)
        for manifest_hash, data in manifests:
            _add(tar, f"{MANIFEST_PREFIX}{manifest_hash}", data)
    return buffer.getvalue()


def expanded_bound(num_blocks: int, num_objects: int, bytes_in_objects: int) -> int:
    """Most bytes a tarball may expand to when it carries at most ``num_blocks`` blocks and, among
    ``num_objects`` objects of ``bytes_in_objects`` bytes in all, their checkpoint manifests: a header
    and padding per entry, the pack with every block at its size limit, manifests within the declared
    object bytes, the end-of-archive record. Never more than DEFAULT_MAX_EXPANDED_BYTES."""
    entries = 1 + max(num_objects, 0)
    manifests = min(max(bytes_in_objects, 0), max(num_objects, 0) * MAX_MANIFEST_BYTES)
    bound = entries * 2 * TAR_BLOCK + max_pack_bytes(max(num_blocks, 0)) + manifests + tarfile.RECORDSIZE
    return min(bound, DEFAULT_MAX_EXPANDED_BYTES)


class _CappedGunzip(io.RawIOBase):
    """Decompresses gzip as it is read, refusing to produce more than ``limit`` bytes: a bomb costs
    at most ``limit`` bytes of inflating, and the tar headers are checked as they come."""

    def __init__(self, data: bytes, limit: int) -> None:
        self._gzip = gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb")
        self._limit = limit
        self.produced = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        wanted = self._limit + 1 - self.produced if size < 0 else min(size, self._limit + 1 - self.produced)
        chunk = self._gzip.read(max(wanted, 1))
        self.produced += len(chunk)
        if self.produced > self._limit:
            raise ProtocolError(ErrorCode.INVALID_BLOCKS, f"metadata tarball expands beyond {self._limit} bytes")
        return chunk

    def drain(self) -> None:
        """Read what follows the archive (within the limit): a tarball is all of its frame."""
        while self.read(1024 * 1024):
            pass


def unpack_blocks(
    data: bytes, max_blocks: int = DEFAULT_MAX_BLOCKS, max_expanded_bytes: int = DEFAULT_MAX_EXPANDED_BYTES
) -> MetadataBundle:
    """The blocks (in order) and manifests of a tarball, the pack and each manifest checked against
    the hash it is named by and every block against its own. The tar is read as a stream: each entry's
    declared size is checked against its limit before any of its content is inflated, and inflating
    stops at ``max_expanded_bytes``."""
    bundle = MetadataBundle()
    try:
        source = _CappedGunzip(data, max_expanded_bytes)
        with tarfile.open(fileobj=source, mode="r|") as tar:
            for index, member in enumerate(tar):
                _check_member(index, member, max_blocks)
                entry = tar.extractfile(member)
                assert entry is not None  # a regular file (checked above)
                _add_entry(bundle, member.name, entry.read(), max_blocks)
        source.drain()
    except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile, InvalidMultihash) as exc:
        raise ProtocolError(ErrorCode.INVALID_BLOCKS, f"metadata tarball is malformed: {exc}") from None
    if bundle.pack is None:
        raise ProtocolError(ErrorCode.INVALID_BLOCKS, "metadata tarball carries no block pack")
    return bundle


def _check_member(index: int, member: tarfile.TarInfo, max_blocks: int) -> None:
    """Refuse an entry by its header alone: too many, not a file, over its size limit, out of order
    (the pack first, then manifests)."""
    if index > MAX_MANIFESTS:
        raise ProtocolError(ErrorCode.INVALID_BLOCKS, f"tarball has more than {MAX_MANIFESTS} manifests")
    is_pack = index == 0
    prefix = PACK_PREFIX if is_pack else MANIFEST_PREFIX
    if not member.name.startswith(prefix):
        raise ProtocolError(
            ErrorCode.INVALID_BLOCKS,
            f"tarball entry {index} ({member.name[:80]!r}) is out of order: the pack first, then manifests",
        )
    limit = max_pack_bytes(max_blocks) if is_pack else MAX_MANIFEST_BYTES
    if not member.isfile() or member.size > limit:
        raise ProtocolError(
            ErrorCode.INVALID_BLOCKS,
            f"tarball entry {member.name[:80]!r} is not a regular file of at most {limit} bytes",
        )


def _add_entry(bundle: MetadataBundle, name: str, content: bytes, max_blocks: int) -> None:
    is_pack = name.startswith(PACK_PREFIX)
    hash_text = name.partition("-")[2]
    entry_hash = Multihash.parse(hash_text)
    if not entry_hash.matches(content):
        what = "pack" if is_pack else "manifest"
        details = InvalidBlocksDetails(manifest=None if is_pack else hash_text)
        raise ProtocolError(ErrorCode.INVALID_BLOCKS, f"{what} {entry_hash} does not match its hash", details)
    if not is_pack:
        bundle.manifests[entry_hash] = content
        return
    try:
        bundle.blocks = decode_pack(content, max_blocks)
    except ModelError as exc:
        raise ProtocolError(ErrorCode.INVALID_BLOCKS, f"block pack {entry_hash}: {exc}") from None
    bundle.pack = (entry_hash, content)
