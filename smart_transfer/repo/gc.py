"""Orphan clean-up (what nothing references is deleted only after a grace period, as a blob-store
backup does with the files of abandoned checkpoints) and repacking. ``collect_garbage`` deletes what no
dataset's chain needs once it is older than a grace period: what failed, abandoned or out-raced pushes and
forced rewrites leave behind (packs and single-block objects off the chain, unreferenced objects), and
single-block objects a pack kept for the chain holds too (off the chain, only once they are older than the grace
period: a REST push may be re-uploading them). Multipart uploads started longer ago than the grace period and never
completed (a push killed mid-object and not run again) are aborted, which frees their parts. With
``repack`` it first writes each chain as one pack, so the blocks of repositories from before packs
(one object per block) and a history of one pack per push become one object, and everything that
pack makes redundant goes.

What a running push may still commit is younger than the grace period (sessions end at the server's
session timeout, which the grace period must not be shorter than), and the objects such young blocks
reference are kept too. A deleted block of the chain is always held by a pack that stays, so a reader
never finds a block missing that the chain needs (readers list the packs again before they give up). The server's
index forgets the objects of blocks a rewrite replaced, so it never claims a collected object is present.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field

from smart_transfer.model import DatasetName, InvalidDatasetName, ModelError, Multihash, NewBlock, objects_of
from smart_transfer.model.manifest import decode_manifest
from smart_transfer.model.pack import encode_pack
from smart_transfer.model.walk import walk_chain
from smart_transfer.repo.errors import CorruptRepository
from smart_transfer.repo.layout import (
    ObjectKind,
    dataset_prefix,
    hash_of_key,
    head_key,
    object_key,
    object_prefix,
    pack_key,
)
from smart_transfer.repo.packs import DatasetBlocks
from smart_transfer.storage import ObjectInfo, ObjectNotFound, ObjectStore

#: Default grace period: the default session timeout.
DEFAULT_GRACE_SECONDS = 3600.0


@dataclass
class GcReport:
    datasets: int = 0
    kept: int = 0
    deleted: list[str] = field(default_factory=list)
    deleted_bytes: int = 0
    too_young: int = 0
    #: Multipart uploads aborted, as "key (upload id)".
    aborted_uploads: list[str] = field(default_factory=list)
    #: Packs a repack wrote (or, in a dry run, would write).
    written: list[str] = field(default_factory=list)


@dataclass
class _Dataset:
    """What one dataset's store holds: its chain, every pack's blocks, its single-block objects."""

    chain: list[NewBlock]
    packs: dict[str, tuple[ObjectInfo, set[Multihash]]]
    singles: dict[Multihash, ObjectInfo]
    block_bytes: dict[Multihash, bytes]


def _refs_of(store: ObjectStore, dataset: DatasetName, blocks: list[NewBlock]) -> tuple[set[str], bool]:
    """Keys of every object ``blocks`` reference, checkpoint files and manifest pages included, and
    whether every manifest was read whole (when one was not, what it names is unknown: the caller
    keeps every checkpoint object rather than guess)."""

    def page(page_hash: Multihash) -> bytes | None:
        with contextlib.suppress(ObjectNotFound):
            return store.get(object_key(dataset, ObjectKind.CHECKPOINT, page_hash))
        return None

    manifests = {}
    complete = True
    for ref in (r for r in objects_of(blocks) if r.kind is ObjectKind.CHECKPOINT):
        data = page(ref.physical_hash)
        try:
            if data is None or not ref.physical_hash.matches(data):
                raise ModelError("missing or corrupt")
            manifests[ref.physical_hash] = decode_manifest(data, page)
        except ModelError:
            complete = False
    return {object_key(dataset, r.kind, r.physical_hash) for r in objects_of(blocks, manifests)}, complete


def _read_packs(blocks: DatasetBlocks, found: _Dataset) -> None:
    """Read every listed pack ``found`` lacks (checked) into it."""
    for info in blocks.packs():
        if info.key in found.packs:
            continue
        content = blocks.read(info.key)
        if content is None:
            continue  # another gc or repack deleted it after the listing: its chain blocks are elsewhere
        found.packs[info.key] = (info, {h for h, _ in content})
        found.block_bytes.update(content)


def _read(blocks: DatasetBlocks) -> _Dataset:
    """Every pack (checked), the single-block objects, and the chain walked back from head through
    them. Head is read first: a commit writes its pack before it moves head, so every block of the
    chain read is in a pack or single-block object listed after it (or, when a concurrent repack
    moved it, in a pack the listing is read again for)."""
    raw = blocks.store.read_ref(head_key(blocks.dataset))
    head = Multihash.parse(raw.decode().strip()) if raw else None
    found = _Dataset([], {}, {}, {})
    _read_packs(blocks, found)
    for info in blocks.single_blocks():
        if (block_hash := hash_of_key(info.key)) is not None:
            found.singles[block_hash] = info

    def fetch(block_hash: Multihash) -> bytes:
        data = found.block_bytes.get(block_hash) or blocks.read_single(block_hash)
        if data is None:
            _read_packs(blocks, found)
            data = found.block_bytes.get(block_hash)
        if data is None:
            raise CorruptRepository(f"{blocks.dataset}: block {block_hash} of the chain is missing from the store")
        return data

    found.chain = walk_chain(head, fetch, lambda _h: False).blocks
    return found


def _repack(blocks: DatasetBlocks, found: _Dataset, report: GcReport, dry_run: bool) -> str | None:
    """Write the chain as one pack (unless that very pack is stored); its key."""
    if not found.chain:
        return None
    data = encode_pack((b.hash, b.data) for b in found.chain)
    address = Multihash.of(data)
    key = pack_key(blocks.dataset, address)
    if key not in found.packs:
        report.written.append(key)
        if not dry_run:
            blocks.write([], (address, data))
    return key


def _delete(store: ObjectStore, info: ObjectInfo, cutoff: float, report: GcReport, dry_run: bool) -> None:
    """Delete an object found unneeded, unless it was written again since it was listed: a re-run
    push rewrites a pack or an object it is about to commit (a smaller window than the listing's)."""
    if not dry_run:
        now = store.head(info.key)
        if now is None:
            return  # deleted meanwhile (another gc)
        if now.modified > cutoff:
            report.too_young += 1
            return
        store.delete(info.key)
    report.deleted.append(info.key)
    report.deleted_bytes += info.size


def _abort_stale_uploads(
    store: ObjectStore, dataset: DatasetName, cutoff: float, report: GcReport, dry_run: bool
) -> None:
    for upload in list(store.list_multipart(dataset_prefix(dataset))):
        if upload.initiated > cutoff:
            report.too_young += 1
            continue
        report.aborted_uploads.append(f"{upload.key} ({upload.upload_id})")
        if not dry_run:
            store.abort_multipart(upload.key, upload.upload_id)


def _collect_blocks(
    blocks: DatasetBlocks, found: _Dataset, repacked: str | None, cutoff: float, report: GcReport, dry_run: bool
) -> list[NewBlock]:
    """Delete packs and single-block objects nothing needs; the young off-chain blocks (a push in
    flight may commit them) are returned, so their objects stay too."""
    on_chain = {b.hash for b in found.chain}
    young: set[Multihash] = set()
    held = _collect_packs(blocks, found, repacked, on_chain, young, cutoff, report, dry_run)
    _collect_singles(blocks, found, on_chain, held, young, cutoff, report, dry_run)
    young_blocks = []
    for block_hash in young:
        with contextlib.suppress(ModelError, CorruptRepository):
            data = found.block_bytes.get(block_hash) or blocks.read_single(block_hash)
            if data is not None:
                young_blocks.append(NewBlock.decode(data, block_hash))
    return young_blocks


def _collect_packs(
    blocks: DatasetBlocks,
    found: _Dataset,
    repacked: str | None,
    on_chain: set[Multihash],
    young: set[Multihash],
    cutoff: float,
    report: GcReport,
    dry_run: bool,
) -> set[Multihash]:
    """Keep the packs the chain needs, delete the others once old; returns the blocks held by packs that
    stay (their single-block objects are redundant), and adds young off-chain blocks to ``young``."""
    held = set(on_chain) if repacked is not None else set()
    for key, (info, hashes) in found.packs.items():
        off_chain = hashes - on_chain
        if key == repacked or (repacked is None and hashes & on_chain):
            report.kept += 1
            held |= hashes
            if info.modified > cutoff:
                young |= off_chain  # a forced rewrite just left these off the chain
        elif off_chain and info.modified > cutoff:
            report.too_young += 1
            young |= off_chain
        elif repacked is not None and hashes <= held:
            _delete(blocks.store, info, float("inf"), report, dry_run)  # the repacked pack holds it all
        else:  # it holds no chain block, and nothing young
            _delete(blocks.store, info, cutoff, report, dry_run)
    return held


def _collect_singles(
    blocks: DatasetBlocks,
    found: _Dataset,
    on_chain: set[Multihash],
    held: set[Multihash],
    young: set[Multihash],
    cutoff: float,
    report: GcReport,
    dry_run: bool,
) -> None:
    """Single-block objects (repositories from before packs): delete those a kept pack holds, and old
    ones off the chain; young off-chain ones go to ``young``."""
    for block_hash, info in found.singles.items():
        if block_hash in held and (block_hash in on_chain or info.modified <= cutoff):
            _delete(blocks.store, info, float("inf"), report, dry_run)  # a pack that stays holds it
        elif block_hash in on_chain:
            report.kept += 1  # a repository from before packs: kept until repacked
        elif info.modified > cutoff:
            report.too_young += 1
            young.add(block_hash)
        else:
            _delete(blocks.store, info, cutoff, report, dry_run)


def collect_garbage(
    store: ObjectStore,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
    dry_run: bool = False,
    repack: bool = False,
    *,
    datasets: Collection[DatasetName] | None = None,
    progress: Callable[[DatasetName, GcReport], None] | None = None,
) -> GcReport:
    """Delete (or, with ``dry_run``, only list) what no chain needs and is older than ``grace_seconds``,
    and abort multipart uploads started before then; with ``repack``, write each chain as one pack
    first (see the module docstring). Only ``datasets`` when given (else every dataset of the store),
    one at a time: memory holds one dataset's chain and references, and the store's keys stream past.
    ``progress`` is told after each dataset (the report so far)."""
    report = GcReport()
    cutoff = time.time() - grace_seconds
    names = [DatasetName(str(name)) for name in datasets] if datasets is not None else _datasets(store)
    for dataset in names:
        report.datasets += 1
        _collect_dataset(store, dataset, cutoff, report, dry_run, repack)
        if progress is not None:
            progress(dataset, report)
    return report


def _datasets(store: ObjectStore) -> Iterator[DatasetName]:
    for child in list(store.list_children("")):
        with contextlib.suppress(InvalidDatasetName):
            yield DatasetName(child)


def _collect_dataset(
    store: ObjectStore, dataset: DatasetName, cutoff: float, report: GcReport, dry_run: bool, repack: bool
) -> None:
    blocks = DatasetBlocks(store, dataset)
    found = _read(blocks)
    repacked = _repack(blocks, found, report, dry_run) if repack else None
    young = _collect_blocks(blocks, found, repacked, cutoff, report, dry_run)
    referenced, complete = _refs_of(store, dataset, found.chain + young)
    for kind in ObjectKind:
        # streamed: a listing page at a time (deleting a listed key does not disturb the listing)
        for info in store.list(object_prefix(dataset, kind)):
            # a manifest that cannot be read whole: keep every checkpoint object rather than guess
            if info.key in referenced or (kind is ObjectKind.CHECKPOINT and not complete):
                report.kept += 1
            elif info.modified > cutoff:
                report.too_young += 1
            else:
                _delete(store, info, cutoff, report, dry_run)
    _abort_stale_uploads(store, dataset, cutoff, report, dry_run)


__all__ = ["DEFAULT_GRACE_SECONDS", "GcReport", "collect_garbage"]
