"""Metadata tarballs: blocks packed as one gzip tar (one entry per block, named by its hash, in
chain order), sent as a single binary frame. Unpacking is bounded against hostile input."""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Iterable

from smart_transfer.model import InvalidMultihash, Multihash
from smart_transfer.model.block import MAX_BLOCK_BYTES
from smart_transfer.protocol.errors import ErrorCode, ProtocolError

#: Most blocks one tarball may carry.
DEFAULT_MAX_BLOCKS = 1_000_000
#: Most bytes a tarball may expand to (guards against decompression bombs).
DEFAULT_MAX_EXPANDED_BYTES = 1024 * 1024 * 1024
#: gzip level: fast; blocks are small JSON that compresses well even at level 1.
COMPRESSION_LEVEL = 1


def pack_blocks(blocks: Iterable[tuple[Multihash, bytes]]) -> bytes:
    """One gzip tar of ``blocks`` (oldest first)."""
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=COMPRESSION_LEVEL, mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tar,
    ):
        for index, (block_hash, data) in enumerate(blocks):
            info = tarfile.TarInfo(f"{index:09d}-{block_hash}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def unpack_blocks(
    data: bytes, max_blocks: int = DEFAULT_MAX_BLOCKS, max_expanded_bytes: int = DEFAULT_MAX_EXPANDED_BYTES
) -> list[tuple[Multihash, bytes]]:
    """The blocks of a tarball, in order, each checked against the hash it is named by."""
    try:
        raw = _gunzip(data, max_expanded_bytes)
        blocks: list[tuple[Multihash, bytes]] = []
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
            for index, member in enumerate(tar):
                if index >= max_blocks:
                    raise ProtocolError(ErrorCode.INVALID_BLOCKS, f"tarball has more than {max_blocks} blocks")
                if not member.isfile() or member.size > MAX_BLOCK_BYTES:
                    raise ProtocolError(ErrorCode.INVALID_BLOCKS, f"tarball entry {member.name[:80]!r} is not a block")
                position, _, hash_text = member.name.partition("-")
                if position != f"{index:09d}":
                    raise ProtocolError(ErrorCode.INVALID_BLOCKS, f"tarball entry {index} is out of order")
                block_hash = Multihash.parse(hash_text)
                source = tar.extractfile(member)
                assert source is not None
                content = source.read()
                if not block_hash.matches(content):
                    raise ProtocolError(
                        ErrorCode.INVALID_BLOCKS, f"block {block_hash} does not match its hash", {"block": hash_text}
                    )
                blocks.append((block_hash, content))
    except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile, InvalidMultihash) as exc:
        raise ProtocolError(ErrorCode.INVALID_BLOCKS, f"metadata tarball is malformed: {exc}") from None
    return blocks


def _gunzip(data: bytes, limit: int) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb") as gz:
        while chunk := gz.read(1024 * 1024):
            out.write(chunk)
            if out.tell() > limit:
                raise ProtocolError(ErrorCode.INVALID_BLOCKS, f"metadata tarball expands beyond {limit} bytes")
    return out.getvalue()
