"""The one push flow, over any Transport: offer the local chain, send the blocks after the last
common block, upload the objects the remote lacks (straight to storage on the smart path), and have
the remote verify everything and move its head by compare-and-swap. On any failure the remote head
is unchanged; a re-run skips what was already uploaded."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from smart_transfer.client.flows.chain import local_chain
from smart_transfer.client.flows.job import FlowJob
from smart_transfer.client.flows.moving import KeepAlive, Meter, Prepare, TransferSummary, move_objects
from smart_transfer.client.flows.objects import upload
from smart_transfer.client.transports.base import Lacking, LocalChain, PushChannel, PushStart, UploadTerms
from smart_transfer.errors import DivergedError, LocalError, SmartTransferError
from smart_transfer.model import ChainTip, Multihash, NewBlock, ObjectKind, ObjectRef, checkpoint_refs
from smart_transfer.model.multihash import hash_text
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import InvalidHeadDetails
from smart_transfer.protocol.messages import ObjectFile, TransferPlan
from smart_transfer.repo import Workspace
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.storage.digest import md5_base64_from_hex, part_md5s
from smart_transfer.storage.local_etags import md5_of_file
from smart_transfer.storage.parts import layout, part_size_for
from smart_transfer.sync.bundle import Bundle
from smart_transfer.sync.heads import MAX_STALE_HEAD_RETRIES, StaleHead, after_invalid_head, remote_has_more
from smart_transfer.sync.pages import held_pages
from smart_transfer.transfer.mover import pages
from smart_transfer.transfer.pieces import in_parallel

#: A page of objects to offer holding more bytes than this is hashed on every core, one object per thread.
PARALLEL_HASH_BYTES = 4 * 1024 * 1024


def _pull_first(name: str) -> DivergedError:
    return DivergedError(
        f"{name}: the remote has blocks the local dataset does not; pull first, then push again "
        "(push --force would discard the remote's blocks)"
    )


def local_bundle(dataset: DatasetRepository, tip: ChainTip, after: Multihash | None) -> Bundle:
    """The local blocks after ``after`` (None: all) with the manifests of their checkpoints."""
    blocks = [NewBlock.decode(data, h) for h, data in dataset.blocks_after(tip, after)]
    manifests = {ref.physical_hash: dataset.read_manifest(ref) for ref in checkpoint_refs(blocks)}
    # the remote holds every manifest page of its chain up to ``after``: those are left out
    return Bundle(blocks, manifests, held=held_pages(dataset, after, manifests))


def _offer(path: Path, item: ObjectFile, terms: UploadTerms) -> ObjectFile:
    """The object as a push offers it: with its MD5, or, when it goes in parts, each part's MD5 (the
    parts hashed in parallel). Only the MD5 is computed: the store checks it (Content-MD5, bound in
    the URL before the first byte is sent, so the file is read twice: hashed, then sent); the object's
    own hash was verified when it entered the workspace. An item that has them already (a URL being
    refreshed) is offered as it is."""
    if not item.asks:
        return item
    ref = item.ref()
    if terms.multipart_threshold is None or ref.size <= terms.multipart_threshold:
        return ObjectFile.of(ref, md5_base64_from_hex(md5_of_file(path)))
    parts = layout(ref.size, part_size_for(ref.size, terms.part_size))
    return ObjectFile.of(ref, part_md5s=[md5_base64_from_hex(md5) for md5 in part_md5s(path, parts)])


def _hasher(workspace: Workspace, dataset: DatasetRepository, terms: UploadTerms) -> Prepare:
    """Completes a page of offered objects with their MD5s, as the page is negotiated (so a push hashes
    the next page while this one uploads): in worker threads, one per core when the page holds more
    than PARALLEL_HASH_BYTES (hashlib releases the GIL), else in one thread (a page of small objects
    costs one hand-off)."""
    store = workspace.local_store

    def offer(item: ObjectFile) -> ObjectFile:
        return _offer(store.path_of(dataset.object_key(item.ref())), item, terms)

    async def prepare(page: Sequence[ObjectFile]) -> list[ObjectFile]:
        if sum(item.size for item in page) <= PARALLEL_HASH_BYTES:
            return await asyncio.to_thread(lambda: [offer(item) for item in page])
        return await in_parallel(page, lambda item: asyncio.to_thread(offer, item), os.cpu_count() or 1)

    return prepare


def _cannot_send(name: str, lacking: Sequence[Lacking]) -> LocalError:
    """The one line of a push whose remote lacks objects this workspace does not hold (data slices or
    older checkpoints' files its pulls left out by choice, or lost ones): nothing was committed."""
    total = sum(lack.item.size for lack in lacking)
    first = lacking[0].item
    command = f"smart-transfer pull {name}"
    if any(lack.item.kind == ObjectKind.CHECKPOINT.value for lack in lacking):
        command += " --all-checkpoints"
    stored = sum(lack.stored for lack in lacking)
    # an interrupted push's copy: only the bytes, hashed, could vouch for it
    uncommitted = f", {stored} of them stored there but not committed" if stored else ""
    return LocalError(
        ErrorCode.OBJECT_NOT_FOUND,
        f"{name}: the remote lacks {len(lacking)} object(s) ({total} bytes{uncommitted}) this workspace does not "
        f"hold, e.g. {first.kind}/{first.physical_hash}; nothing was committed: `{command}` (from a server that "
        "holds them) fetches them, then push again",
    )


async def _check_absent(name: str, channel: PushChannel, absent: Sequence[ObjectRef], terms: UploadTerms) -> None:
    """Ask the remote whether it holds the objects a push offers that this workspace does not hold
    (offers without MD5s, page by page, before any upload; asking changes nothing there): it must hold
    every one committed; else the push ends here."""
    lacking: list[Lacking] = []
    for page in pages([ObjectFile.of(ref) for ref in absent], terms.page_limit):
        lacking += await channel.lacking(page)
    if lacking:
        raise _cannot_send(name, lacking)


async def push(job: FlowJob) -> TransferSummary:
    """Make the remote head the local head of the job's dataset (see the module docstring)."""
    dataset = job.dataset
    tip = await asyncio.to_thread(dataset.require_tip)
    local = await asyncio.to_thread(local_chain, dataset, tip)
    expected = await asyncio.to_thread(dataset.remote_head, job.remote.url)
    for _ in range(MAX_STALE_HEAD_RETRIES):
        try:
            return await _push_once(job, local, expected)
        except SmartTransferError as exc:
            if exc.code is not ErrorCode.INVALID_HEAD or not isinstance(exc.details, InvalidHeadDetails):
                raise
            actual = Multihash.parse(exc.details.actual) if exc.details.actual else None
            verdict = after_invalid_head(local.contains, expected, actual)
            if verdict is StaleHead.PULL_FIRST:
                raise _pull_first(dataset.name) from None
            if verdict is StaleHead.FINAL:
                raise
            expected = actual
    raise DivergedError(f"{dataset.name}: the remote head keeps moving; try again")


async def _push_once(job: FlowJob, local: LocalChain, expected: Multihash | None) -> TransferSummary:
    assert local.tip is not None
    dataset, force, tip = job.dataset, job.force, local.tip
    after, guess, plan = await _planned(dataset, local, expected, force)
    async with job.transport.push(job.remote) as channel:
        start = await channel.start(local, expected, plan, force)
        current = start.current_head
        summary = TransferSummary("push", dataset.name, job.remote.url, hash_text(current), hash_text(current))
        summary.protocol = job.transport.name
        if remote_has_more(local.contains, current) and not force:
            raise _pull_first(dataset.name)
        bundle = await _bundle_to_send(dataset, local, start, after, guess)
        # objects of blocks the remote has are never offered; of those offered, the remote may hold
        # some this workspace left out by choice: asked first (changing nothing there), the push ends
        # before any upload otherwise
        absent = await asyncio.to_thread(dataset.objects_missing, bundle.offered())
        terms = await channel.send_blocks(bundle)
        if absent:
            await _check_absent(dataset.name, channel, absent, terms)
        # hashing and uploads take time (the commit is the server's): keep the session alive meanwhile
        async with KeepAlive(channel, job.settings.keepalive_interval) as beat:
            unheld = {(ref.kind, ref.physical_hash) for ref in absent}  # the remote holds them (checked above)
            held = [ref for ref in bundle.offered() if (ref.kind, ref.physical_hash) not in unheld]
            files = [ObjectFile.of(ref) for ref in held]  # their MD5s come page by page
            beat.meter = Meter("push", files, job.tools.progress)
            prepare = _hasher(job.workspace, dataset, terms)
            moved = await move_objects(job, beat, files, terms.page_limit, partial(upload, job), prepare)
            summary.moved(moved)
        new_head = await channel.finish(tip.head)
    await asyncio.to_thread(dataset.set_remote_head, job.remote.url, new_head)
    summary.new_head = str(new_head)
    summary.blocks = len(bundle.blocks)
    summary.up_to_date = new_head == current  # no block sent, and no forced move back either
    return summary.finish()


async def _planned(
    dataset: DatasetRepository, local: LocalChain, expected: Multihash | None, force: bool
) -> tuple[Multihash | None, Bundle, TransferPlan]:
    """The block after which the push expects to send, its bundle, and the plan that bounds it. The plan
    bounds what the blocks tarball may expand to on the server: without force the blocks sent are
    exactly those after the expected head; a forced push may send any part of the chain."""
    assert local.tip is not None
    after = expected if expected and local.contains(expected) and not force else None
    guess = await asyncio.to_thread(local_bundle, dataset, local.tip, after)
    refs = guess.objects()
    plan = TransferPlan(num_blocks=len(guess.blocks), num_objects=len(refs), bytes_in_objects=sum(r.size for r in refs))
    return after, guess, plan


async def _bundle_to_send(
    dataset: DatasetRepository, local: LocalChain, start: PushStart, after: Multihash | None, guess: Bundle
) -> Bundle:
    """The blocks after the last common block. Forced, with the remote ahead of us, that is our head and
    no block is sent: the remote moves its head back to our target head (sync.rewind_to), whichever the
    transport. Usually the remote is where we last left it, so the planned bundle is the one to send."""
    assert local.tip is not None
    candidates = (start.current_head, start.common_block)
    common = next((h for h in candidates if h is not None and local.contains(h)), None)
    return guess if common == after else await asyncio.to_thread(local_bundle, dataset, local.tip, common)
