"""A bundle: the blocks one operation moves (oldest first) and the checkpoint manifests they reference.
Every path checks a bundle here before trusting it: from a tarball's block pack (smart push and pull),
from blocks and manifests fetched one by one (simple pull), or read back from a store (REST head move)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from msgspec import Struct, field

from smart_transfer.model import ModelError, Multihash, NewBlock, ObjectKind, ObjectRef, checkpoint_refs, objects_of
from smart_transfer.model.bulk import collector_paused
from smart_transfer.model.manifest import CheckpointManifest, MissingPage, PageSource, decode_manifest, no_pages
from smart_transfer.model.manifest_delta import files_listed, pages_to_send
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import InvalidBlocksDetails, ProtocolError
from smart_transfer.protocol.tarball import DEFAULT_MAX_BLOCKS, DEFAULT_MAX_EXPANDED_BYTES, pack_blocks, unpack_blocks
from smart_transfer.storage.digest import bytes_mismatch


def invalid_block(block: Multihash | str, message: str) -> ProtocolError:
    """The InvalidBlocks error that names ``block`` as the one at fault."""
    return ProtocolError(ErrorCode.INVALID_BLOCKS, message, InvalidBlocksDetails(block=str(block)))


class Bundle(Struct):
    """Checked blocks and the decoded manifests of every checkpoint they reference."""

    blocks: list[NewBlock] = field(default_factory=list)
    manifests: dict[Multihash, CheckpointManifest] = field(default_factory=dict)
    #: The blocks' pack as received (its address and bytes), when they came in one.
    pack: tuple[Multihash, bytes] | None = None
    #: Manifest pages the receiver holds (each with its subtree): the tarball leaves them out.
    held: set[Multihash] = field(default_factory=set)

    def objects(self) -> list[ObjectRef]:
        """Every object the blocks reference, checkpoint files included."""
        return objects_of(self.blocks, self.manifests)

    def offered(self) -> list[ObjectRef]:
        """What a sender offers the receiver: every object the blocks reference except the pages and
        files under the manifest pages the receiver holds (it committed them with the checkpoint that
        holds those pages), so a change to a large checkpoint offers the files around the change, not
        every file of the state."""
        if not self.held:
            return self.objects()
        sent = self.pages()
        files = files_listed(sent.values())
        if files is None:
            return self.objects()
        roots = {ref.physical_hash for ref in checkpoint_refs(self.blocks)}
        return [
            ref
            for ref in self.objects()
            if ref.kind is not ObjectKind.CHECKPOINT
            or ref.physical_hash in roots
            or ref.physical_hash in sent
            or ref.physical_hash in files
        ]

    def tarball(self) -> bytes:
        """The bundle as the protocol's metadata tarball."""
        return pack_blocks(((b.hash, b.data) for b in self.blocks), self.pages().items())

    def pages(self) -> dict[Multihash, bytes]:
        """The manifest pages the tarball carries: every page of the bundle's checkpoints outside
        what the receiver holds."""
        return pages_to_send(self.manifests.values(), self.held)


def check_bundle(
    blocks: Sequence[NewBlock], manifests: Mapping[Multihash, bytes], held: PageSource = no_pages
) -> Bundle:
    """The bundle of ``blocks`` with the manifests they reference, each whole, of the size its block
    records, hashing to its address and well-formed; InvalidBlocks otherwise. Manifests and their
    pages come from ``manifests`` (what the sender sent) or else ``held`` (what the receiver holds)."""

    def source(page: Multihash) -> bytes | None:
        found = manifests.get(page)
        return found if found is not None else held(page)

    decoded: dict[Multihash, CheckpointManifest] = {}
    for ref in checkpoint_refs(blocks):
        content = source(ref.physical_hash)
        details = InvalidBlocksDetails(manifest=str(ref.physical_hash))
        if content is None or bytes_mismatch(content, ref.physical_hash, ref.size) is not None:
            raise ProtocolError(
                ErrorCode.INVALID_BLOCKS,
                f"checkpoint manifest {ref.physical_hash} is missing, or not the {ref.size} bytes its block records",
                details,
            )
        try:
            decoded[ref.physical_hash] = decode_manifest(content, source)
        except MissingPage as exc:
            message = f"checkpoint manifest {ref.physical_hash}: page {exc.page} is neither sent nor held"
            raise ProtocolError(ErrorCode.INVALID_BLOCKS, message, details) from None
        except ModelError as exc:
            raise ProtocolError(
                ErrorCode.INVALID_BLOCKS, f"checkpoint manifest {ref.physical_hash}: {exc}", details
            ) from None
    return Bundle(list(blocks), decoded)


def decode_blocks(entries: Iterable[tuple[Multihash, bytes]]) -> list[NewBlock]:
    """Blocks from (address, bytes) pairs whose addresses the caller checked; InvalidBlocks if malformed."""
    blocks = []
    for address, content in entries:
        try:
            blocks.append(NewBlock.decode(content, address))
        except ModelError as exc:
            raise invalid_block(address, f"block {address} is malformed: {exc}") from None
    return blocks


def bundle_from_tarball(
    data: bytes,
    max_expanded_bytes: int = DEFAULT_MAX_EXPANDED_BYTES,
    max_blocks: int = DEFAULT_MAX_BLOCKS,
    held: PageSource = no_pages,
) -> Bundle:
    """Unpack, decode and check a metadata tarball of at most ``max_blocks`` blocks; manifest pages
    it leaves out come from ``held`` (the receiver's store)."""
    with collector_paused():  # see model/bulk.py
        unpacked = unpack_blocks(data, max_blocks, max_expanded_bytes)
        bundle = check_bundle(decode_blocks(unpacked.blocks), unpacked.manifests, held)
    bundle.pack = unpacked.pack
    return bundle
