"""Metadata tarballs: blocks packed as one gzip tar (one entry per block, ``{index:09d}-{hash}``, in
chain order), followed by the checkpoint manifests those blocks reference (``manifest-{hash}``), sent
as a single binary frame. Unpacking is bounded against hostile input."""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field

from smart_transfer.model import InvalidMultihash, Multihash
from smart_transfer.model.block import MAX_BLOCK_BYTES
from smart_transfer.model.manifest import MAX_MANIFEST_BYTES
from smart_transfer.protocol.errors import ErrorCode, InvalidBlocksDetails, ProtocolError

#: Most blocks one tarball may carry.
DEFAULT_MAX_BLOCKS = 1_000_000
#: Most bytes a tarball may expand to (guards against decompression bombs).
DEFAULT_MAX_EXPANDED_BYTES = 1024 * 1024 * 1024
#: Most checkpoint manifests one tarball may carry.
MAX_MANIFESTS = 100_000
#: gzip level: fast; blocks are small JSON that compresses well even at level 1.
COMPRESSION_LEVEL = 1


MANIFEST_PREFIX = "manifest-"


@dataclass
class MetadataBundle:
    """What a tarball carries: blocks in order, and checkpoint manifests by hash."""

    blocks: list[tuple[Multihash, bytes]] = field(default_factory=list)
    manifests: dict[Multihash, bytes] = field(default_factory=dict)


def pack_blocks(blocks: Iterable[tuple[Multihash, bytes]], manifests: Iterable[tuple[Multihash, bytes]] = ()) -> bytes:
    """One gzip tar of ``blocks`` (oldest first) and then ``manifests``."""
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=COMPRESSION_LEVEL, mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tar,
    ):
        for index, (block_hash, data) in enumerate(blocks):
            info = tarfile.TarInfo(f"{index:09d}-{block_hash}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for manifest_hash, data in manifests:
            info = tarfile.TarInfo(f"{MANIFEST_PREFIX}{manifest_hash}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def unpack_blocks(
    data: bytes, max_blocks: int = DEFAULT_MAX_BLOCKS, max_expanded_bytes: int = DEFAULT_MAX_EXPANDED_BYTES
) -> MetadataBundle:
    """The blocks (in order) and manifests of a tarball, each checked against the hash it is named by."""
    bundle = MetadataBundle()
    try:
        raw = _gunzip(data, max_expanded_bytes)
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
            for index, member in enumerate(tar):
                if index >= max_blocks + MAX_MANIFESTS:
                    raise ProtocolError(ErrorCode.INVALID_BLOCKS, f"tarball has more than {max_blocks} blocks")
                is_manifest = member.name.startswith(MANIFEST_PREFIX)
                limit = MAX_MANIFEST_BYTES if is_manifest else MAX_BLOCK_BYTES
                if not member.isfile() or member.size > limit:
                    raise ProtocolError(ErrorCode.INVALID_BLOCKS, f"tarball entry {member.name[:80]!r} is not a block")
                if is_manifest:
                    hash_text = member.name[len(MANIFEST_PREFIX) :]
                else:
                    position, _, hash_text = member.name.partition("-")
                    if position != f"{len(bundle.blocks):09d}" or bundle.manifests:
                        raise ProtocolError(ErrorCode.INVALID_BLOCKS, f"tarball entry {index} is out of order")
                entry_hash = Multihash.parse(hash_text)
                source = tar.extractfile(member)
                assert source is not None
                content = source.read()
                if not entry_hash.matches(content):
                    what = "manifest" if is_manifest else "block"
                    raise ProtocolError(
                        ErrorCode.INVALID_BLOCKS,
                        f"{what} {entry_hash} does not match its hash",
                        InvalidBlocksDetails(**{what: hash_text}),
                    )
                if is_manifest:
                    bundle.manifests[entry_hash] = content
                else:
                    bundle.blocks.append((entry_hash, content))
    except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile, InvalidMultihash) as exc:
        raise ProtocolError(ErrorCode.INVALID_BLOCKS, f"metadata tarball is malformed: {exc}") from None
    return bundle


def _gunzip(data: bytes, limit: int) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb") as gz:
        while chunk := gz.read(1024 * 1024):
            out.write(chunk)
            if out.tell() > limit:
                raise ProtocolError(ErrorCode.INVALID_BLOCKS, f"metadata tarball expands beyond {limit} bytes")
    return out.getvalue()
