"""The one pull flow, over any Transport: ask for what the local chain lacks, check it (sync rules),
download missing objects (and repair ones the local chain lost) straight into the workspace, verified,
then commit the local head by compare-and-swap. Nothing is visible before the commit; a re-run
skips every object already present."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace

import aiohttp

from smart_transfer.checkpoint.slot import install_latest
from smart_transfer.client.errors import DivergedError, LocalError, SmartTransferError, from_protocol
from smart_transfer.client.flow import FlowOptions, KeepAlive, Meter, TransferSummary, move_objects
from smart_transfer.client.remote import RemoteDataset
from smart_transfer.client.transport import LocalChain, PullStart, Transport
from smart_transfer.model import ChainTip, ModelError, Multihash, ObjectKind, ObjectRef, committed_refs
from smart_transfer.model.multihash import hash_text
from smart_transfer.model.objects import with_files
from smart_transfer.protocol.errors import DivergedDetails, ErrorCode, ProtocolError
from smart_transfer.protocol.messages import HttpRequest, ObjectFile
from smart_transfer.repo import RepositoryError, Workspace
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.sync.attach import attach, known_blocks
from smart_transfer.transfer.http import download


def local_chain(dataset: DatasetRepository, tip: ChainTip | None) -> LocalChain:
    return LocalChain(tip, known_blocks(dataset, tip), dataset.on_chain)


def _diverged(name: str) -> DivergedError:
    return DivergedError(
        f"{name}: local and remote histories diverged; pull --force replaces the local history "
        "(or push --force the remote one)"
    )


def _attach_pulled(dataset: DatasetRepository, local: LocalChain, start: PullStart, force: bool) -> ChainTip | None:
    """Where the pulled blocks attach on the local chain (the force/Seed rule), all rules checked."""
    blocks = start.bundle.blocks
    if start.begin_after is not None and not local.contains(start.begin_after):
        raise LocalError(ErrorCode.INVALID_BLOCKS, "the server sent blocks after a block this workspace does not have")
    try:
        base = attach(local.tip, blocks, force, dataset.chain_tip_at)
    except ProtocolError as exc:
        if exc.code is ErrorCode.DIVERGED:
            raise _diverged(dataset.name) from None
        raise from_protocol(exc, remote=False, context=f"{dataset.name}: the remote chain was refused: ") from None
    if blocks and blocks[-1].hash != start.head:
        raise LocalError(ErrorCode.INVALID_BLOCKS, "the blocks received do not end at the announced head")
    return base


def _repairs(dataset: DatasetRepository, base: ChainTip | None) -> list[ObjectRef]:
    """Objects the kept part of the local chain references that are not (whole) in the workspace
    (e.g. moved to quarantine by verify): the pull fetches them again."""
    if base is None:
        return []
    # committed blocks were validated when they were: a light parse finds what they reference
    refs = committed_refs(data for _, data in dataset.blocks_after(base, None))
    manifests = {}
    for ref in refs:
        if ref.kind is ObjectKind.CHECKPOINT and not dataset.objects_missing([ref]):
            with contextlib.suppress(RepositoryError):
                manifests[ref.physical_hash] = dataset.read_manifest(ref)
    return dataset.objects_missing(with_files(refs, manifests))


async def pull(
    workspace: Workspace,
    transport: Transport,
    options: FlowOptions,
    remote: RemoteDataset,
    name: str,
    force: bool,
) -> TransferSummary:
    """Bring the local dataset ``name`` up to the remote head (see the module docstring)."""
    dataset = workspace.dataset(name)
    tip = await asyncio.to_thread(dataset.tip)
    local = await asyncio.to_thread(local_chain, dataset, tip)
    summary = TransferSummary("pull", dataset.name, remote.url, hash_text(local.head), hash_text(local.head))
    summary.protocol = transport.name
    options = replace(options, timeouts=transport.object_timeouts(options.timeouts))
    async with transport.pull(remote) as channel:
        try:
            start = await channel.start(local, force)
        except SmartTransferError as exc:
            if exc.code is ErrorCode.DIVERGED and isinstance(exc.details, DivergedDetails):
                if _on_chain(local, exc.details.remote_head):
                    return _local_ahead(summary)
                raise _diverged(dataset.name) from None
            raise
        if start.head != local.head and local.contains(start.head):
            # the remote head is an older block of ours: nothing to pull, and force never drops our blocks
            await channel.finish()
            return _local_ahead(summary)
        # checks, downloads and the local commit take time: keep the session alive meanwhile
        async with KeepAlive(channel, options.keepalive_interval) as beat:
            base = await asyncio.to_thread(_attach_pulled, dataset, local, start, force)
            await _fetch_objects(workspace, dataset, beat, options, start, base, summary)
        await channel.finish()
    return summary.finish()


def _on_chain(local: LocalChain, head: str) -> bool:
    try:
        return local.contains(Multihash.parse(head))
    except ModelError:
        return False  # not even a hash: certainly not ours


def _local_ahead(summary: TransferSummary) -> TransferSummary:
    summary.up_to_date = True
    summary.note = "the local dataset is ahead of the remote; nothing to pull (push it instead)"
    return summary.finish()


async def _fetch_objects(
    workspace: Workspace,
    dataset: DatasetRepository,
    beat: KeepAlive,
    options: FlowOptions,
    start: PullStart,
    base: ChainTip | None,
    summary: TransferSummary,
) -> None:
    bundle = start.bundle
    refs = bundle.objects()
    # blocks are invisible until head moves: write their pack while the objects download
    writing = asyncio.create_task(asyncio.to_thread(dataset.store_blocks, bundle.blocks, bundle.pack))
    try:
        missing = await asyncio.to_thread(dataset.objects_missing, refs)
        repairs = await asyncio.to_thread(_repairs, dataset, base)
        summary.objects_skipped = len(refs) - len(missing)
        summary.objects_repaired = len(repairs)
        known = {(r.kind, r.physical_hash) for r in missing}
        missing += [r for r in repairs if (r.kind, r.physical_hash) not in known]
        store = workspace.local_store

        async def fetch(http: aiohttp.ClientSession, item: ObjectFile, request: HttpRequest, meter: Meter) -> int:
            ref = item.ref()
            verified = await download(
                http,
                request,
                ref.physical_hash,
                ref.size,
                store.temp_path(),
                meter.add_bytes,
                timeouts=options.timeouts,
                limiter=options.limiter,
            )
            await asyncio.to_thread(store.adopt, dataset.object_key(ref), verified.temp_path)
            return verified.size

        files = [ObjectFile.of(r) for r in missing]
        beat.meter = Meter("pull", files, options.progress)
        summary.moved(await move_objects(options, beat, files, start.page_limit, fetch))
    finally:
        await writing
    new_tip = await asyncio.to_thread(_commit_pulled, workspace, dataset, start, base, summary.old_head)
    summary.new_head = str(new_tip.head) if new_tip is not None else summary.old_head
    summary.blocks = len(bundle.blocks)
    summary.up_to_date = not bundle.blocks
    if new_tip is not None:
        await asyncio.to_thread(workspace.index.set_remote_head, dataset.name, summary.remote, new_tip.head)


def _commit_pulled(
    workspace: Workspace, dataset: DatasetRepository, start: PullStart, base: ChainTip | None, old_head: str | None
) -> ChainTip | None:
    """Move the local head from where the pull began (compare-and-swap) and switch the checkpoint."""
    bundle = start.bundle
    if not bundle.blocks:
        return dataset.tip()
    expected = Multihash.parse(old_head) if old_head else None
    new_tip = dataset.commit(expected, base, bundle.blocks, bundle.manifests, blocks_stored=True)
    install_latest(workspace.root, dataset, bundle.blocks, bundle.manifests)
    return new_tip
