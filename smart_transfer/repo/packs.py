"""A dataset's blocks as its store holds them: block packs (``model/pack.py``), one per commit, and,
in repositories written before packs (or blocks uploaded one by one over REST), one object per block.
Every read is checked: a pack against the address it is stored under, every block against its own."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence

from msgspec import Struct

from smart_transfer.model import DatasetName, ModelError, Multihash
from smart_transfer.model.pack import PREAMBLE_BYTES, decode_pack, encode_pack, header_size, read_count, read_index
from smart_transfer.repo.errors import CorruptRepository
from smart_transfer.repo.layout import block_key, block_prefix, hash_of_key, pack_key, pack_prefix
from smart_transfer.storage import ObjectInfo, ObjectNotFound, ObjectStore
from smart_transfer.storage.base import stored_mismatch
from smart_transfer.storage.errors import StorageUnavailable

Blocks = list[tuple[Multihash, bytes]]


class StoredPack(Struct, frozen=True):
    """A pack in the store: its address, key and size."""

    address: Multihash
    key: str
    size: int


class DatasetBlocks:
    """Write and read one dataset's packs and per-block objects in ``store``."""

    def __init__(self, store: ObjectStore, dataset: DatasetName) -> None:
        self.store = store
        self.dataset = dataset

    def write(
        self, blocks: Sequence[tuple[Multihash, bytes]], pack: tuple[Multihash, bytes] | None = None
    ) -> StoredPack:
        """Store ``blocks`` (oldest first) as one pack, ``pack`` when the caller has it encoded
        already: one write, and the store's answer (size and MD5) must show it kept exactly these
        bytes. Content-addressed, so writing the same pack again is harmless (a resumed push does)."""
        if pack is None:
            data = encode_pack(blocks)
            pack = (Multihash.of(data), data)
        address, data = pack
        key = pack_key(self.dataset, address)
        info = self.store.put(key, data)
        problem = stored_mismatch(info, len(data), hashlib.md5(data).hexdigest())
        if problem is not None:
            raise StorageUnavailable(f"the store did not keep pack {address} intact ({problem})")
        return StoredPack(address, key, len(data))

    def packs(self) -> list[ObjectInfo]:
        """Every pack in the store (one listing)."""
        return [info for info in self.store.list(pack_prefix(self.dataset)) if hash_of_key(info.key) is not None]

    def read(self, key: str) -> Blocks | None:
        """The blocks of the pack at ``key``, the pack checked against its address and every block
        against its own; None when it is gone (a repack or gc deleted it after it was listed: its
        blocks are in a pack that stays), CorruptRepository when it does not check out."""
        address = hash_of_key(key)
        try:
            data = self.store.get(key)
        except ObjectNotFound:
            return None
        if address is None or not address.matches(data):
            raise CorruptRepository(f"{self.dataset}: pack {address} does not match its hash")
        try:
            return decode_pack(data)
        except ModelError as exc:
            raise CorruptRepository(f"{self.dataset}: pack {address}: {exc}") from None

    def find_in(self, key: str, wanted: Multihash) -> bytes | None:
        """Block ``wanted`` read out of the pack at ``key`` through the pack's index (two ranged
        reads: the header, then the block), checked against its address; None when the pack lacks it."""
        try:
            preamble = b"".join(self.store.stream(key, 0, PREAMBLE_BYTES - 1))
            header = b"".join(self.store.stream(key, 0, header_size(read_count(preamble)) - 1))
            entry = next((e for e in read_index(header) if e.address == wanted), None)
            if entry is None:
                return None
            data = b"".join(self.store.stream(key, entry.offset, entry.offset + entry.size - 1))
        except ObjectNotFound:
            return None
        except ModelError as exc:
            raise CorruptRepository(f"{self.dataset}: pack {key.rpartition('/')[2]}: {exc}") from None
        if not wanted.matches(data):
            raise CorruptRepository(f"{self.dataset}: block {wanted} in pack {key} does not match its hash")
        return data

    def single_blocks(self) -> Iterator[ObjectInfo]:
        """The blocks stored one object each (older repositories, REST uploads)."""
        return self.store.list(block_prefix(self.dataset))

    def read_single(self, block_hash: Multihash) -> bytes | None:
        """Block ``block_hash`` stored as its own object, checked (None: there is none)."""
        try:
            data = self.store.get(block_key(self.dataset, block_hash))
        except ObjectNotFound:
            return None
        if not block_hash.matches(data):
            raise CorruptRepository(f"{self.dataset}: block {block_hash} in the store does not match its hash")
        return data

    def write_single(self, block_hash: Multihash, data: bytes) -> bool:
        """Store one block as its own object (a REST upload); True when this call created it."""
        return self.store.create_if_absent(block_key(self.dataset, block_hash), data)
