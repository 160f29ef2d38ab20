"""The one pull flow, over any Transport: ask for what the local chain lacks, check it (sync rules),
download missing objects (and repair ones the local chain lost) straight into the workspace, verified,
from the peers the plan lists first and from storage for the rest, then commit the local head by
compare-and-swap. Nothing is visible before the commit; a re-run skips every object already present.
``follow`` repeats the same pull in one session each time the remote head moves."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from functools import partial

from smart_transfer.checkpoint.files import store_manifest
from smart_transfer.checkpoint.slot import CheckpointSlot, install_checked, install_latest, latest_checkpoint
from smart_transfer.client.flows.chain import local_chain
from smart_transfer.client.flows.job import FlowJob
from smart_transfer.client.flows.moving import KeepAlive, Meter, TransferSummary, move_objects, watched
from smart_transfer.client.flows.objects import download, download_from
from smart_transfer.client.transports.base import LocalChain, PullChannel, PullStart
from smart_transfer.errors import DivergedError, LocalError, SmartTransferError, from_protocol
from smart_transfer.model import ChainTip, ModelError, Multihash, NewBlock, ObjectKind, ObjectRef, objects_of
from smart_transfer.model.manifest import CheckpointManifest, pages_wanted
from smart_transfer.model.multihash import hash_text
from smart_transfer.model.selection import Selection
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import DivergedDetails, ProtocolError
from smart_transfer.protocol.messages import HttpRequest, ObjectFile
from smart_transfer.repo import RepositoryError, Workspace
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.sync.attach import attach
from smart_transfer.sync.heads import local_ahead
from smart_transfer.sync.selection import ChainView, bundle_next_offset, range_past_head, split_objects


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


def _repairs(
    dataset: DatasetRepository,
    base: ChainTip | None,
    check: bool,
    selection: Selection,
    latest: Multihash | None,
    next_offset: int,
) -> tuple[list[ObjectRef], bool]:
    """Objects the kept part of the local chain references, that ``selection`` wants (``latest``: the
    checkpoint a reader restores; ``next_offset``: the new head's, for "the last N records") and that are
    not (whole) in the workspace (e.g. moved to quarantine by
    verify, or left out by a narrower selection before): the pull fetches them. Looked for only when
    ``check`` (a loss is known, see ``repo.lost``, the selection widened, or the pull rewinds: "the last
    N records" of an older head reach back into the kept chain); a whole chain's objects
    are otherwise present. Also whether that is all: not when a lost manifest or page hides files the
    next pull finds."""
    if base is None or not check:
        return [], True
    kept = [NewBlock.decode(data, block_hash) for block_hash, data in dataset.blocks_after(base, None)]
    refs = objects_of(kept)
    manifests = {}
    lost: dict[Multihash, ObjectRef] = {}
    hidden = False
    for ref in refs:
        if ref.kind is not ObjectKind.CHECKPOINT:
            continue
        if dataset.objects_missing([ref]):
            hidden = True  # a lost manifest: its files are known once it is back
            continue
        try:
            manifests[ref.physical_hash] = dataset.read_manifest(ref)
        except RepositoryError:
            lost.update((r.physical_hash, r) for r in _lost_pages(dataset, ref))
    wanted = split_objects(ChainView(kept, manifests, latest, next_offset), selection).wanted
    return dataset.objects_missing(wanted) + list(lost.values()), not (hidden or lost)


def _store_manifests(dataset: DatasetRepository, manifests: Iterable[CheckpointManifest]) -> None:
    """The manifests and pages the metadata brought (checked against their hashes when decoded), stored
    now: they are not downloaded again as objects."""
    for manifest in manifests:
        store_manifest(dataset, manifest)


def _lost_pages(dataset: DatasetRepository, root: ObjectRef) -> list[ObjectRef]:
    """The pages of a stored paged manifest that the workspace lost (and no lost page hides): fetched
    again, the next pull finds the files below them."""
    data = dataset.page_source(root.physical_hash)
    with contextlib.suppress(ModelError):
        if data is not None:
            lost = pages_wanted(data, dataset.page_source)
            return [ObjectRef(ObjectKind.CHECKPOINT, page, size) for page, size in lost]
    return []


async def pull(job: FlowJob) -> TransferSummary:
    """Bring the local dataset up to the remote head (see the module docstring)."""
    async with job.transport.pull(job.remote) as channel:
        summary, session_open = await _increment(job, channel)
        if session_open:
            await channel.finish()
    return summary.finish()


async def follow(job: FlowJob, on_update: Callable[[TransferSummary], None], stop: asyncio.Event) -> None:
    """Pull the dataset up to the remote head, then keep the session open and pull each new head in it,
    calling ``on_update`` with the summary of every pull (the first one included), until ``stop`` is
    set. Each increment is a whole pull: verified, committed by compare-and-swap, resumable; a follower of a
    range of slices then drops the files that fell out of it (``drop.keep_bounded``)."""
    # the drop's rule reads the local chain (smart_transfer.reading): loaded once the session is open
    from smart_transfer.client.flows.drop import keep_bounded

    bounded_at: object = None  # what the last drop saw (see _bounds_moved)
    async with job.transport.pull(job.remote) as channel:
        while True:
            summary, _ = await _increment(job, channel)
            if summary.local_ahead:
                raise LocalError(
                    ErrorCode.INVALID_REQUEST,
                    f"{summary.dataset}: the local dataset is ahead of the remote: push it first",
                )
            mark = await asyncio.to_thread(_bounds_mark, job, summary)
            if mark != bounded_at:  # stays bounded; the drop walks the chain only when something fell out
                await keep_bounded(job.workspace, job.dataset.name, job.selection, job.remote.url)
                bounded_at = mark
            on_update(summary.finish())
            if stop.is_set():
                await channel.finish()
                return
            if await channel.follow(stop, job.settings.keepalive_interval) is None:
                return


def _bounds_mark(job: FlowJob, summary: TransferSummary) -> object:
    """What a follower's drop depends on: for a range of slices, the head (a new block may push slices
    out of it); for every slice, the installed checkpoint (only a new one makes files fall out). Equal
    marks: nothing new to drop, so a follower's update of a long chain does not walk it again."""
    if not job.selection.every_slice:
        return summary.new_head
    return CheckpointSlot(job.workspace.root, job.dataset.name).current_hash()


async def _increment(job: FlowJob, channel: PullChannel) -> tuple[TransferSummary, bool]:
    """One pull in an open channel, everything but its last message; returns its summary and whether
    the session is still open (a server that found the local head unknown ended it)."""
    heap = job.tools.heap
    try:
        return await _pull_increment(job, channel)
    finally:
        if heap is not None:
            heap.release()  # the decoded blocks: the process's policy held them while this pull used them


async def _pull_increment(job: FlowJob, channel: PullChannel) -> tuple[TransferSummary, bool]:
    """``_increment`` without the heap policy's bookkeeping."""
    dataset = job.dataset
    tip = await asyncio.to_thread(dataset.tip)
    local = await asyncio.to_thread(local_chain, dataset, tip)
    summary = TransferSummary("pull", dataset.name, job.remote.url, hash_text(local.head), hash_text(local.head))
    summary.protocol = job.transport.name
    try:
        start = await channel.start(local, job.force, job.announce)
    except SmartTransferError as exc:
        if exc.code is ErrorCode.DIVERGED and isinstance(exc.details, DivergedDetails):
            if local_ahead(local.contains, local.head, exc.details.remote_head):
                await _fill_behind(job, Multihash.parse(exc.details.remote_head), summary)  # in a new session
                return _local_ahead(summary), False
            raise _diverged(dataset.name) from None
        raise
    if job.tools.heap is not None:
        job.tools.heap.hold()
    if local_ahead(local.contains, local.head, start.head):
        base = await asyncio.to_thread(dataset.chain_tip_at, start.head)
        if base is not None and not start.bundle.blocks:
            await _objects_behind(job, channel, start, base, summary)
        return _local_ahead(summary), True
    # checks, downloads and the local commit take time: keep the session alive meanwhile
    async with KeepAlive(channel, job.settings.keepalive_interval) as beat:
        base = await asyncio.to_thread(_attach_pulled, dataset, local, start, job.force)
        await _fetch_objects(job, beat, start, base, summary)
    return summary, True


def _check_range(job: FlowJob, head_sequence: int | None) -> None:
    """Refuse a range by blocks that reaches past the head (``head_sequence``: the remote's, known only now
    that the chain came), before anything is moved or recorded."""
    reason = range_past_head(job.selection, head_sequence)
    if reason is not None:
        raise LocalError(ErrorCode.INVALID_REQUEST, f"{job.dataset.name}: {reason}")


async def _fill_behind(job: FlowJob, remote_head: Multihash, summary: TransferSummary) -> None:
    """The local chain is ahead of the remote (whose head, ``remote_head``, is on it): still fetch what the
    selection wants of the common chain up to that head (the server signs those objects: they are
    committed there), in a new session offering that head as the local one. A remote that moved
    meanwhile sends blocks: nothing is fetched (the next pull sees where the chains stand)."""
    base = await asyncio.to_thread(job.dataset.chain_tip_at, remote_head)
    if base is None:
        return
    offered = await asyncio.to_thread(local_chain, job.dataset, base)
    async with job.transport.pull(job.remote) as channel:
        start = await channel.start(offered, False, job.announce)
        if start.head == remote_head and not start.bundle.blocks:
            await _objects_behind(job, channel, start, base, summary)
        await channel.finish()


async def _objects_behind(
    job: FlowJob, channel: PullChannel, start: PullStart, base: ChainTip, summary: TransferSummary
) -> None:
    """The object phase of a pull on the common chain up to the remote head ``base`` (the local chain goes
    on past it): what the selection wants of it and the workspace lacks (``_repairs``); no block moves,
    the local head stays. The blocks after ``base`` stay whole whatever the selection (``ChainView``)."""
    async with KeepAlive(channel, job.settings.keepalive_interval) as beat:
        await _move_objects(job, beat, start, base, summary)
    await asyncio.to_thread(job.workspace.selections.set, job.dataset.name, job.selection)
    await asyncio.to_thread(job.dataset.set_remote_head, summary.remote, base.head)


def _local_ahead(summary: TransferSummary) -> TransferSummary:
    summary.up_to_date = summary.local_ahead = True
    summary.note = "the local dataset is ahead of the remote; nothing to pull (push it instead)"
    return summary.finish()


async def _fetch_objects(
    job: FlowJob, beat: KeepAlive, start: PullStart, base: ChainTip | None, summary: TransferSummary
) -> None:
    dataset, workspace, bundle = job.dataset, job.workspace, start.bundle
    loss, settled = await _move_objects(job, beat, start, base, summary)
    new_tip = await asyncio.to_thread(_commit_pulled, workspace, dataset, start, base, summary.old_head)
    await asyncio.to_thread(workspace.selections.set, dataset.name, job.selection)
    if loss and settled:
        # the installed checkpoint's linked files may be the damaged ones: checked, installed again if so
        await asyncio.to_thread(install_checked, workspace.root, dataset)
        workspace.lost.clear(dataset.name, loss)
    summary.new_head = str(new_tip.head) if new_tip is not None else summary.old_head
    summary.blocks = len(bundle.blocks)
    summary.up_to_date = not bundle.blocks
    if new_tip is not None:
        await asyncio.to_thread(dataset.set_remote_head, summary.remote, new_tip.head)


async def _move_objects(
    job: FlowJob, beat: KeepAlive, start: PullStart, base: ChainTip | None, summary: TransferSummary
) -> tuple[frozenset[str], bool]:
    """Store the pulled blocks (invisible until the commit) and move the objects the selection wants that
    the workspace lacks: those of the new blocks, and repairs on the kept chain up to ``base``. Returns
    the loss marks seen and whether the repairs are all there is (see ``_repairs``)."""
    dataset, workspace, bundle = job.dataset, job.workspace, start.bundle
    # the checkpoint install_latest makes current: its files are moved, older ones' only when selected
    latest = latest_checkpoint(bundle.blocks)
    _check_range(job, bundle.blocks[-1].block.sequence_number if bundle.blocks else _sequence(base))
    next_offset = bundle_next_offset(bundle.blocks, base)
    refs = split_objects(ChainView(bundle.blocks, bundle.manifests, latest, next_offset), job.selection).wanted
    recorded = await asyncio.to_thread(workspace.selections.get, dataset.name)
    # until head moves the old chain is the committed one: record what both chains hold everything of
    await asyncio.to_thread(workspace.selections.set, dataset.name, recorded.narrower(job.selection))
    # blocks are invisible until head moves: write their pack while the objects download
    writing = asyncio.create_task(asyncio.to_thread(dataset.store_blocks, bundle.blocks, bundle.pack))
    try:
        await asyncio.to_thread(_store_manifests, dataset, bundle.manifests.values())
        missing = await asyncio.to_thread(dataset.objects_missing, refs)
        loss = workspace.lost.seen(dataset.name)
        rewinds = base is not None and str(base.head) != summary.old_head  # older "last N": the kept chain
        check = bool(loss) or rewinds or recorded.narrower(job.selection) != job.selection  # or wider
        kept_latest = latest or CheckpointSlot(workspace.root, dataset.name).current_hash()
        repairs, settled = await asyncio.to_thread(
            _repairs, dataset, base, check, job.selection, kept_latest, next_offset
        )
        summary.objects_skipped = len(refs) - len(missing)
        summary.objects_repaired = len(repairs)
        known = {(r.kind, r.physical_hash) for r in missing}
        missing += [r for r in repairs if (r.kind, r.physical_hash) not in known]
        files = [ObjectFile.of(r) for r in missing]
        beat.meter = meter = Meter("pull", files, job.tools.progress)
        files = await _from_peers(job, beat, meter, start, files, summary)
        summary.moved(await move_objects(job, beat, files, start.page_limit, partial(download, job)))
        summary.objects_transferred += summary.objects_from_peers
        summary.bytes_transferred += summary.bytes_from_peers
    finally:
        await writing
    return loss, settled


def _sequence(tip: ChainTip | None) -> int | None:
    return tip.sequence_number if tip is not None else None


async def _from_peers(
    job: FlowJob, beat: KeepAlive, meter: Meter, start: PullStart, files: list[ObjectFile], summary: TransferSummary
) -> list[ObjectFile]:
    """Fetch what the plan's peers can serve (transfer/peers.py); returns what is left for storage."""
    health = job.tools.peer_health
    summary.peers_listed = len(start.peers)
    if health is None or not start.peers or not files:
        return files
    # peers' HTTP stack loads only when a plan lists peers
    from smart_transfer.transfer.choice import open_transport
    from smart_transfer.transfer.peers import PeerFetcher

    # a peer that fails is left for the next source at once: no retries against it
    parallel, timeouts = job.settings.parallel, job.timeouts.once()
    asked = f"{len(files)} objects asked of {len(start.peers)} peer(s)"
    transport = open_transport(parallel, timeouts, job.tools.limiter, storage=False)
    async with transport as peer_wire, watched(job.settings.progress_timeout, meter, lambda: asked) as dog:
        one = partial(download_from, job, timeouts, peer_wire)

        async def fetch(item: ObjectFile, request: HttpRequest) -> int:
            with dog.in_flight():
                size = await one(item, request, meter)
            meter.add_object()
            return size

        with beat.interruptible():
            with dog.in_flight():
                peers = await health.reachable(peer_wire, [peer.url for peer in start.peers], timeouts)
            fetcher = PeerFetcher(health, peers, fetch, parallel)
            left = await fetcher.fetch_all(files)
    summary.objects_from_peers = fetcher.report.objects
    summary.bytes_from_peers = fetcher.report.bytes
    summary.peers_dropped = {
        **{
            peer.url: "unreachable: no answer to the connectivity check"
            for peer in start.peers
            if peer.url not in peers
        },
        **fetcher.report.dropped,
    }
    return left


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
