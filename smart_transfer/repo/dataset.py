"""One dataset on a store: read its chain, and extend or rewrite it with a compare-and-swap of head."""

from __future__ import annotations

import contextlib
import secrets
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence

from smart_transfer.model import (
    AddData,
    ChainTip,
    DatasetName,
    MetadataBlock,
    ModelError,
    Multihash,
    NewBlock,
    ObjectKind,
    ObjectRef,
    checkpoint_refs,
    committed_refs,
    objects_of,
    validate_extension,
)
from smart_transfer.model.block import block_sequence, utc_now
from smart_transfer.model.bulk import collector_paused
from smart_transfer.model.events import Event, Seed
from smart_transfer.model.manifest import CheckpointManifest, decode_manifest
from smart_transfer.model.walk import walk_chain
from smart_transfer.repo.errors import CorruptRepository, DatasetNotFound, HeadMoved
from smart_transfer.repo.index import RepositoryIndex
from smart_transfer.repo.layout import hash_of_key, head_key, object_key
from smart_transfer.repo.packs import DatasetBlocks
from smart_transfer.repo.page_cache import PAGES
from smart_transfer.storage import ObjectNotFound, ObjectStore
from smart_transfer.storage.base import stored_as_promised


def new_dataset_id() -> str:
    """A fresh random dataset id in the ``did:odf:`` form."""
    return "did:odf:f" + secrets.token_hex(32)


def _head_moved(expected: Multihash | None, actual: Multihash | None) -> HeadMoved:
    """The refusal of a commit that expected head at ``expected`` and found it at ``actual``."""
    return HeadMoved(str(expected) if expected is not None else None, str(actual) if actual is not None else None)


def _sequence_entries(base: ChainTip | None, blocks: Sequence[NewBlock]) -> list[tuple[int, Multihash, int, bytes]]:
    """The index's entry for each block on top of ``base``: sequence number, hash, the next record
    offset after it, and its bytes."""
    entries = []
    offset = base.next_offset if base is not None else 0
    for item in blocks:
        event = item.block.event
        if isinstance(event, AddData) and event.new_data is not None:
            offset = event.new_data.offset_interval.end + 1
        entries.append((item.block.sequence_number, item.hash, offset, item.data))
    return entries


class DatasetRepository:
    """Read and commit one dataset's chain. Head only ever moves by compare-and-swap."""

    def __init__(self, store: ObjectStore, index: RepositoryIndex, name: DatasetName, lock: threading.Lock) -> None:
        self.store = store
        self._index = index
        self.name = name
        self._lock = lock
        #: The dataset's packs and single-block objects in the store.
        self.blocks = DatasetBlocks(store, name)
        self._packs_seen: set[str] | None = None
        self._uncached: dict[Multihash, bytes] = {}  # blocks of packs read while the index is read-only

    # -- reading -------------------------------------------------------------------------------

    def head(self) -> Multihash | None:
        """The committed head as stored (None: the dataset does not exist)."""
        raw = self.store.read_ref(head_key(self.name))
        if raw is None:
            return None
        try:
            return Multihash.parse(raw.decode("ascii", "replace").strip())
        except ModelError as exc:
            raise CorruptRepository(f"{self.name}: head reference is not a hash: {exc}") from None

    def block_bytes(self, block_hash: Multihash) -> bytes:
        """A block's bytes (see ``find_block``); CorruptRepository when the store has it nowhere."""
        data = self.find_block(block_hash)
        if data is None:
            raise CorruptRepository(f"{self.name}: block {block_hash} is missing from the store")
        return data

    def find_block(self, block_hash: Multihash) -> bytes | None:
        """A block's bytes, from the index when cached, else from the store (checked): the packs the
        index has not cached yet are read whole and cached (a walk needs their other blocks next;
        each pack is read once), then a single-block object. None when the store has it nowhere."""
        data = self._index.block_bytes(self.name, block_hash) or self._uncached.get(block_hash)
        if data is not None:
            return data
        for relist in (False, True):  # a repack may have just moved it: list the packs once more
            if self._cache_new_packs(relist):
                data = self._index.block_bytes(self.name, block_hash) or self._uncached.get(block_hash)
                if data is not None:
                    return data
            data = self.blocks.read_single(block_hash)
            if data is not None:
                return data
        return None

    def _cache_new_packs(self, relist: bool) -> bool:
        """Read the packs of the store this index has not cached (listing them once per instance, or
        again with ``relist``) and cache their blocks; whether any was new."""
        if self._packs_seen is not None and not relist:
            return False
        seen = self._packs_seen = self._packs_seen or set()
        found = False
        for info in self.blocks.packs():
            address = hash_of_key(info.key)
            if info.key in seen or address is None or self._index.has_pack(self.name, address):
                continue
            blocks = self.blocks.read(info.key)
            if blocks is None:
                continue  # repacked meanwhile: the next listing has the pack that holds its blocks
            seen.add(info.key)
            if self._index.read_only:
                self._uncached.update(blocks)
            else:
                self._index.record_blocks(self.name, blocks, address)
            found = True
        return found

    def tip(self) -> ChainTip | None:
        """The tip of the committed chain, bringing the index up to date first."""
        with self._lock:
            return self._sync()

    def require_tip(self) -> ChainTip:
        tip = self.tip()
        if tip is None:
            raise DatasetNotFound(self.name)
        return tip

    def _sync(self) -> ChainTip | None:
        """Make the index match the stored head: walk back from head to the first block on the indexed
        chain, validate the new part, and record it. Handles rewrites (force). A read-only index is
        taken as it is: it names the chain committed when it was opened."""
        indexed = self._index.tip(self.name)
        if self._index.read_only:
            return indexed
        head = self.head()
        if head is None:
            if indexed is not None:
                self._index.forget(self.name)
            return None
        if indexed is not None and indexed.head == head:
            return indexed
        try:
            walk = walk_chain(head, self.block_bytes, self.on_chain)
        except ModelError as exc:
            raise CorruptRepository(f"{self.name}: stored chain is invalid: {exc}") from None
        base = self.chain_tip_at(walk.base) if walk.base is not None else None
        self._index.record_blocks(self.name, ((b.hash, b.data) for b in walk.blocks))
        self._record(indexed, base, walk.blocks)
        return self._index.tip(self.name)

    def _record(
        self,
        old_tip: ChainTip | None,
        base: ChainTip | None,
        blocks: Sequence[NewBlock],
        manifests: Mapping[Multihash, CheckpointManifest] | None = None,
        new_tip: ChainTip | None = None,
    ) -> ChainTip:
        """Record ``blocks`` (whose bytes the index caches already) on top of ``base`` in the index as
        the new chain, with every object they reference (checkpoint files from ``manifests`` or, if
        absent, the store). They are validated first unless the caller did (``new_tip``: what
        validating them gave)."""
        if new_tip is None:
            new_tip = self._validated(base, blocks)
        objects = [(ref.kind, ref.physical_hash, ref.size) for ref in self._objects_of(blocks, manifests)]
        if old_tip is not None and (base is None or base.sequence_number < old_tip.sequence_number):
            self._forget_replaced(old_tip, base)
        with collector_paused():  # an entry per block, all alive until written: see model/bulk.py
            self._index.advance(self.name, old_tip, new_tip, _sequence_entries(base, blocks), objects)
        return new_tip

    def _validated(self, base: ChainTip | None, blocks: Sequence[NewBlock]) -> ChainTip:
        """The tip ``blocks`` make on top of ``base``; CorruptRepository when they break a chain rule
        or there are none."""
        try:
            new_tip = validate_extension(base, ((b.hash, b.block) for b in blocks))
        except ModelError as exc:
            raise CorruptRepository(f"{self.name}: stored chain is invalid: {exc}") from None
        if new_tip is None:
            raise CorruptRepository(f"{self.name}: empty chain")
        return new_tip

    def _objects_of(
        self, blocks: Sequence[NewBlock], manifests: Mapping[Multihash, CheckpointManifest] | None
    ) -> list[ObjectRef]:
        """Every object ``blocks`` reference, checkpoint files included: their manifests come from
        ``manifests`` or else the store."""
        known = dict(manifests or {})
        for ref in checkpoint_refs(blocks):
            if ref.physical_hash not in known:
                with contextlib.suppress(CorruptRepository):  # servable without its files; verify reports it
                    known[ref.physical_hash] = self.read_manifest(ref)
        return list(objects_of(blocks, known))

    def _forget_replaced(self, old_tip: ChainTip, base: ChainTip | None) -> None:
        """A rewrite replaced the blocks after ``base`` up to ``old_tip``: their objects may be collected
        by gc later, so stop claiming them present, except those a kept block (up to ``base``) references
        too (the same bytes added twice: a pull is planned from this answer); those the new chain
        references again are recorded with it."""
        first = base.sequence_number + 1 if base is not None else 0
        dropped = self._refs_between(first, old_tip.sequence_number)
        if dropped and base is not None:
            dropped -= self._refs_between(0, base.sequence_number)
        self._index.forget_objects(self.name, dropped)

    def _refs_between(self, first: int, last: int) -> set[tuple[ObjectKind, Multihash]]:
        """What blocks ``first..last`` of the chain reference (slices and checkpoint manifests)."""
        hashes = self._index.hashes_between(self.name, first, last)
        return {(ref.kind, ref.physical_hash) for ref in committed_refs(self.block_bytes(h) for h in hashes)}

    def blocks_after(self, tip: ChainTip, begin_after: Multihash | None) -> Iterator[tuple[Multihash, bytes]]:
        """Blocks of the chain ending at ``tip`` that come after ``begin_after`` (None: all), oldest first.
        Raises KeyError when ``begin_after`` is not on the chain."""
        first = 0
        if begin_after is not None:
            seq = self.sequence_of(begin_after)
            if seq is None or seq > tip.sequence_number:
                raise KeyError(str(begin_after))
            first = seq + 1
        yield from self.chain_blocks(first, tip.sequence_number)

    def derived_records(self, kind: str, first: int, last: int) -> list[bytes | None]:
        """Records ``first..last`` that a reader derived from this chain and kept in the index (a server's
        table history, in pieces: ``record_derived``); None where there is none. The records are the
        caller's to check against the chain (the index keeps them across restarts and rewrites)."""
        return self._index.derived_records(self.name, kind, first, last)

    def record_derived(self, kind: str, records: Iterable[tuple[int, bytes]]) -> None:
        """Keep records derived from this chain in the index, by number (nothing in a read-only index)."""
        if not self._index.read_only:
            self._index.record_derived(self.name, kind, records)

    def sequence_of(self, block_hash: Multihash) -> int | None:
        """The sequence number of ``block_hash`` if it is on the current (indexed) chain."""
        data = self._index.block_bytes(self.name, block_hash)
        if data is None:
            return None
        seq = block_sequence(data)
        if seq is None:
            return None
        entry = self._index.entry_at(self.name, seq)
        return seq if entry is not None and entry[0] == block_hash else None

    def on_chain(self, block_hash: Multihash) -> bool:
        """Whether ``block_hash`` is on the current (indexed) chain."""
        return self.sequence_of(block_hash) is not None

    def hash_at(self, seq: int) -> Multihash:
        """The hash of block ``seq`` of the current (indexed) chain."""
        return self.required_entry(seq)[0]

    def required_entry(self, seq: int) -> tuple[Multihash, int]:
        """``entry_at(seq)``, which the caller knows is there: CorruptRepository when the index lacks it."""
        entry = self._index.entry_at(self.name, seq)
        if entry is None:
            raise CorruptRepository(f"index of {self.name} has no block {seq}; delete the index to rebuild it")
        return entry

    def chain_tip_at(self, block_hash: Multihash) -> ChainTip | None:
        """The tip the chain had at ``block_hash`` if that block is on the current chain."""
        seq = self.sequence_of(block_hash)
        tip = self._index.tip(self.name)
        if seq is None or tip is None:
            return None
        entry = self._index.entry_at(self.name, seq)
        assert entry is not None
        return ChainTip(block_hash, seq, tip.dataset_id, entry[1])

    def read_manifest(self, ref: ObjectRef) -> CheckpointManifest:
        """A stored checkpoint manifest, checked against its hash."""
        try:
            data = self.store.get(self.object_key(ref))
        except ObjectNotFound:
            raise CorruptRepository(f"{self.name}: checkpoint manifest {ref.physical_hash} is missing") from None
        if not ref.physical_hash.matches(data):
            raise CorruptRepository(f"{self.name}: checkpoint manifest {ref.physical_hash} does not match its hash")
        try:
            return decode_manifest(data, self.page_source)
        except ModelError as exc:
            raise CorruptRepository(f"{self.name}: checkpoint manifest {ref.physical_hash}: {exc}") from None

    def page_source(self, page: Multihash) -> bytes | None:
        """A stored page of a paged checkpoint manifest (the reader checks it against its hash), or
        None; an intact page read once comes from the process's page cache after."""
        key = (self.store.describe(), self.name, page)
        data = PAGES.get(key)
        if data is None:
            try:
                data = self.store.get(object_key(self.name, ObjectKind.CHECKPOINT, page))
            except ObjectNotFound:
                return None
            if page.matches(data):  # a corrupt copy is never cached: once repaired, it is read again
                PAGES.put(key, data)
        return data

    def manifests_of(self, refs: Iterable[ObjectRef]) -> dict[Multihash, CheckpointManifest]:
        """The manifest of every checkpoint among ``refs`` (from the store)."""
        return {r.physical_hash: self.read_manifest(r) for r in refs if r.kind is ObjectKind.CHECKPOINT}

    # -- what is committed: the one rule ---------------------------------------------------------

    def committed(self, kind: ObjectKind, object_hash: Multihash, *, resync: bool = False) -> int | None:
        """The size of the object as committed in this dataset, None when no committed block references
        it. The index answers, without a round trip to the store. ``resync``: on a miss, bring the index
        up to the stored head once and ask again, for a reader that must not refuse an object another
        server committed since (a download URL). Without it the answer is as of this index's last sync:
        a writer asking whether to accept an upload may then accept one more upload of an object another
        replica committed meanwhile; that can only write the same bytes again (the key is their hash and
        the PUT binds their MD5), and the commit checks them like any other."""
        size = self._index.object_size(self.name, kind, object_hash)
        if size is None and resync:
            self.require_tip()
            size = self._index.object_size(self.name, kind, object_hash)
        return size

    def has_object(self, ref: ObjectRef) -> bool:
        """Whether ``ref`` is committed with exactly its size (``committed``, as of the last sync)."""
        return self.committed(ref.kind, ref.physical_hash) == ref.size

    def committed_objects(self) -> Iterator[tuple[ObjectKind, Multihash, int]]:
        """Every object the index holds committed in this dataset: (kind, hash, size)."""
        return self._index.objects(self.name)

    # -- the indexed chain, read without syncing --------------------------------------------------

    def indexed_tip(self) -> ChainTip | None:
        """The tip the index was last synced to (``tip`` syncs first)."""
        return self._index.tip(self.name)

    def cached_block(self, block_hash: Multihash, *, resync: bool = False) -> bytes | None:
        """A block's bytes if the index caches them (content-addressed: valid whatever the head);
        ``resync``: on a miss, bring the index up to the stored head once and look again."""
        data = self._index.block_bytes(self.name, block_hash)
        if data is None and resync:
            self.require_tip()
            data = self._index.block_bytes(self.name, block_hash)
        return data

    def cache_blocks(self, blocks: Iterable[tuple[Multihash, bytes]]) -> None:
        """Cache block bytes by hash (a block uploaded on its own, on no chain yet)."""
        self._index.record_blocks(self.name, blocks)

    def entry_at(self, seq: int) -> tuple[Multihash, int] | None:
        """The hash of block ``seq`` of the indexed chain and the next record offset after it."""
        return self._index.entry_at(self.name, seq)

    def hashes_between(self, first_seq: int, last_seq: int) -> Iterator[Multihash]:
        """The hashes of blocks ``first_seq..last_seq`` (inclusive) of the indexed chain, in order."""
        return self._index.hashes_between(self.name, first_seq, last_seq)

    def chain_entries(self, first_seq: int, last_seq: int) -> Iterator[tuple[Multihash, bytes | None]]:
        """``chain_blocks`` without looking up what the index does not keep beside its entries (None): for
        a caller that reads few of the blocks and fetches those itself (``block_bytes``)."""
        return self._index.chain_blocks(self.name, first_seq, last_seq)

    def chain_blocks(self, first_seq: int, last_seq: int) -> Iterator[tuple[Multihash, bytes]]:
        """Hashes and bytes of blocks ``first_seq..last_seq`` of the indexed chain, in order, in one index
        scan (bytes an old index did not keep beside its entries are looked up by hash)."""
        for block_hash, data in self._index.chain_blocks(self.name, first_seq, last_seq):
            yield block_hash, data if data is not None else self.block_bytes(block_hash)

    def chain_hash_texts(self, first_seq: int, last_seq: int) -> Iterator[tuple[str, bytes]]:
        """``chain_blocks`` with each hash as its text, unparsed (a scan that needs few of the hashes)."""
        for text, data in self._index.chain_hash_texts(self.name, first_seq, last_seq):
            yield text, data if data is not None else self.block_bytes(Multihash.parse(text))

    # -- uploads the server hashed itself (the simple protocol) -----------------------------------

    def record_staged(self, ref: ObjectRef, md5_hex: str) -> None:
        """Remember the MD5 of an object this server stored after hashing its body, so the commit that
        references it checks it like a promised one."""
        self._index.record_staged(self.name, ref.kind, ref.physical_hash, md5_hex)

    def staged_md5(self, kind: ObjectKind, object_hash: Multihash) -> str | None:
        """The MD5 recorded by ``record_staged`` for the object, if any."""
        return self._index.staged_md5(self.name, kind, object_hash)

    # -- what a workspace knows of its remotes, and a server of its readers' peers ----------------

    def remote_head(self, remote: str) -> Multihash | None:
        """The head ``remote`` had when this repository last synced the dataset with it."""
        return self._index.remote_head(self.name, remote)

    def set_remote_head(self, remote: str, head: Multihash) -> None:
        """Record the head ``remote`` has now (nothing is written when it is unchanged)."""
        self._index.set_remote_head(self.name, remote, head)

    @property
    def writable(self) -> bool:
        """Whether this repository's index may be written (a read-only open sees it as it was)."""
        return not self._index.read_only

    def record_peer(self, url: str, value: bytes) -> None:
        """Remember a peer announcement of the dataset by its URL (the value is the caller's)."""
        self._index.record_peer(self.name, url, value)

    def peer_records(self) -> Iterator[tuple[str, bytes]]:
        """Every peer announcement recorded for the dataset: (URL, value)."""
        return self._index.peer_records(self.name)

    def forget_peers(self, urls: Iterable[str]) -> None:
        """Drop the peer announcements of ``urls``."""
        self._index.forget_peers(self.name, urls)

    def object_key(self, ref: ObjectRef) -> str:
        return object_key(self.name, ref.kind, ref.physical_hash)

    def objects_missing(self, refs: Iterable[ObjectRef]) -> list[ObjectRef]:
        """Objects not (or not fully) in this repository's store. In a workspace every object was
        verified before it was renamed into place, so one stat per object is enough."""
        missing = []
        for ref in refs:
            key = self.object_key(ref)
            path = self.store.local_path(key)
            if path is not None:
                try:
                    present = path.stat().st_size == ref.size
                except FileNotFoundError:
                    present = False
            else:
                present = stored_as_promised(self.store.head(key), ref.size)
            if not present:
                missing.append(ref)
        return missing

    # -- writing -------------------------------------------------------------------------------

    def commit(
        self,
        expected_head: Multihash | None,
        base: ChainTip | None,
        blocks: Sequence[NewBlock],
        manifests: Mapping[Multihash, CheckpointManifest] | None = None,
        *,
        blocks_stored: bool = False,
    ) -> ChainTip:
        """Store ``blocks`` (which extend ``base``, a block on the current chain or None for a new
        chain; skipped when ``blocks_stored``, i.e. the caller already wrote them with store_blocks)
        and move head from ``expected_head`` to the last of them by compare-and-swap. With no blocks,
        head moves back to ``base`` (a forced rewind). Every referenced object must already be in the
        store. Raises HeadMoved when head was not ``expected_head``; then nothing visible changed."""
        if not blocks and base is None:
            raise ValueError("nothing to commit")
        with self._lock:
            current = self._sync()
            actual = current.head if current is not None else None
            if actual != expected_head:
                raise _head_moved(expected_head, actual)
            new_tip = validate_extension(base, ((b.hash, b.block) for b in blocks))
            if not blocks_stored:
                self.store_blocks(blocks)
            self._move_head(expected_head, blocks[-1].hash if blocks else base.head)  # type: ignore[union-attr]
            # when base is below the old tip (a forced rewrite) the index drops the replaced entries
            return self._record(current, base, blocks, manifests, new_tip)

    def _move_head(self, expected_head: Multihash | None, new_head: Multihash) -> None:
        """Compare-and-swap head from ``expected_head`` to ``new_head``; HeadMoved when another commit
        moved it first."""
        expected = str(expected_head).encode() if expected_head is not None else None
        if not self.store.compare_and_swap(head_key(self.name), expected, str(new_head).encode()):
            raise _head_moved(expected_head, self.head())

    def store_blocks(self, blocks: Sequence[NewBlock], pack: tuple[Multihash, bytes] | None = None) -> None:
        """Write ``blocks`` (oldest first) as one pack, ``pack`` if the caller has it encoded: one
        store write however many blocks, checked by the store's answer, and cache them in the index.
        Nothing references the pack until a commit moves head, and every commit writes its pack
        (again, on a re-run: the same bytes under the same address), so gc never took it first."""
        if not blocks:
            return
        with collector_paused():  # see model/bulk.py
            stored = self.blocks.write([] if pack is not None else [(b.hash, b.data) for b in blocks], pack)
            self._index.record_blocks(self.name, ((b.hash, b.data) for b in blocks), stored.address)

    def append(self, events: Iterable[Event], dataset_id: str | None = None) -> ChainTip:
        """Append blocks for ``events`` on top of the current head (creating the dataset with a Seed
        first when it does not exist). Objects the events reference must already be stored."""
        tip = self.tip()
        blocks: list[NewBlock] = []
        prev = tip
        seq = tip.sequence_number if tip is not None else -1
        prev_hash = tip.head if tip is not None else None
        all_events = list(events)
        if tip is None and not (all_events and isinstance(all_events[0], Seed)):
            all_events.insert(0, Seed(dataset_id or new_dataset_id(), "root"))
        for event in all_events:
            seq += 1
            item = NewBlock.of(MetadataBlock(seq, prev_hash, utc_now(), event))
            blocks.append(item)
            prev_hash = item.hash
        return self.commit(prev.head if prev is not None else None, prev, blocks)
