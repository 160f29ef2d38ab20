"""The server side of a push: check the expected head, attach the new blocks (sync.attach), negotiate
uploads (SkipUpload from the index or one listing, never a HEAD per object), then the verified
commit (sync.commit), sending keep-alives while it verifies."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

from smart_transfer.model import ChainTip, Multihash, ObjectRef
from smart_transfer.protocol.errors import ErrorCode, ObjectDetails, ProtocolError
from smart_transfer.protocol.messages import (
    DatasetPushComplete,
    DatasetPushCompleteConfirmed,
    DatasetPushMetadataAccepted,
    DatasetPushObjectsTransferRequest,
    DatasetPushObjectsTransferResponse,
    DatasetPushRequest,
    DatasetPushRequestAccepted,
    HttpRequest,
    HttpUpload,
    MetadataTarball,
    ObjectFile,
    Progress,
    PushObjectTransfer,
    SkipUpload,
)
from smart_transfer.protocol.tarball import expanded_bound
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.server.pull_flow import check_page
from smart_transfer.server.session import ServerSession
from smart_transfer.server.settings import ServerSettings
from smart_transfer.server.state import ServerState
from smart_transfer.storage import ObjectInfo
from smart_transfer.storage.digest import md5_hex_from_base64
from smart_transfer.sync.attach import attach, check_expected_head, last_common
from smart_transfer.sync.bundle import Bundle, bundle_from_tarball
from smart_transfer.sync.commit import ObjectKey, commit_chain, list_objects, verify_uploads

T = TypeVar("T")


@dataclass
class PushState:
    """What one push session has learned so far."""

    remote_tip: ChainTip | None
    base: ChainTip | None = None
    bundle: Bundle = field(default_factory=Bundle)
    promised_md5: dict[ObjectKey, str] = field(default_factory=dict)
    listing: dict[str, ObjectInfo] | None = None
    #: Every object the bundle references, by kind and hash (computed once: pages look it up).
    required: dict[ObjectKey, ObjectRef] = field(default_factory=dict)


def _accept(dataset: DatasetRepository, request: DatasetPushRequest) -> tuple[PushState, DatasetPushRequestAccepted]:
    tip = dataset.tip()
    actual = tip.head if tip is not None else None
    expected = Multihash.parse(request.current_head) if request.current_head else None
    check_expected_head(expected, actual, request.force_update_if_diverged)
    common = last_common(dataset, [Multihash.parse(h) for h in request.known_blocks])
    accepted = DatasetPushRequestAccepted(
        current_head=str(actual) if actual else None, common_block=str(common.head) if common else None
    )
    return PushState(remote_tip=tip), accepted


def _attach(dataset: DatasetRepository, state: PushState, request: DatasetPushRequest, data: bytes) -> None:
    """Decode and check the pushed bundle on top of the chain it attaches to (worker thread). The
    tarball may expand to no more than the request's transfer plan declared."""
    plan = request.transfer_plan
    bundle = bundle_from_tarball(data, expanded_bound(plan.num_blocks, plan.num_objects, plan.bytes_in_objects))
    state.base = attach(state.remote_tip, bundle.blocks, request.force_update_if_diverged, dataset.chain_tip_at)
    state.bundle = bundle
    state.required = {(r.kind, r.physical_hash): r for r in bundle.objects()}


def _negotiate(
    dataset: DatasetRepository, state: PushState, items: list[ObjectFile], settings: ServerSettings
) -> list[PushObjectTransfer]:
    required = state.required
    transfers: list[PushObjectTransfer] = []
    for item in items:
        ref = item.ref()
        key = (ref.kind, ref.physical_hash)
        if required.get(key) != ref:
            raise ProtocolError(
                ErrorCode.OBJECT_NOT_ALLOWED,
                f"{item.kind}/{item.physical_hash} ({item.size} bytes) is not referenced by the pushed blocks",
                ObjectDetails(object=item.physical_hash),
            )
        if item.md5 is None:
            raise ProtocolError(ErrorCode.BAD_MESSAGE, f"object {item.physical_hash} needs its md5 for upload")
        state.promised_md5[key] = md5_hex_from_base64(item.md5)
        if dataset.has_object(ref):
            transfers.append(PushObjectTransfer(object_file=item, transfer=SkipUpload()))
            continue
        if state.listing is None:
            state.listing = list_objects(dataset)
        listed = state.listing.get(dataset.object_key(ref))
        if listed is not None and listed.size == ref.size and listed.etag == state.promised_md5[key]:
            # uploaded by an earlier, unfinished push: verified by size and MD5, so not sent again
            transfers.append(PushObjectTransfer(object_file=item, transfer=SkipUpload()))
            continue
        signed = dataset.store.presign_put(dataset.object_key(ref), settings.url_ttl_seconds, content_md5=item.md5)
        request = HttpRequest(method="PUT", url=signed.url, headers=signed.headers, expires_at=signed.expires_at)
        transfers.append(PushObjectTransfer(object_file=item, transfer=HttpUpload(request=request)))
    return transfers


def _verify_and_commit(dataset: DatasetRepository, state: PushState) -> ChainTip:
    """Check every required object, then CAS head (worker thread; the blocks' pack is stored)."""
    verify_uploads(dataset, list(state.required.values()), state.promised_md5)
    if not state.bundle.blocks:
        if state.remote_tip is None:
            raise ProtocolError(ErrorCode.INVALID_BLOCKS, "nothing to commit to a dataset that does not exist")
        return state.remote_tip
    expected = state.remote_tip.head if state.remote_tip is not None else None
    return commit_chain(dataset, expected, state.base, state.bundle.blocks, state.bundle.manifests, blocks_stored=True)


async def _with_keep_alive(session: ServerSession, work: Awaitable[T], interval: float) -> T:
    """Await ``work`` while telling the client, every ``interval`` seconds, that the server is at it.
    ``work`` is shielded: a commit in flight when the session times out finishes (or fails) before
    the timeout is reported, so what the client is told is never contradicted by a later head move."""

    async def beat() -> None:
        while True:
            await asyncio.sleep(interval)
            await session.send(Progress(objects_done=0, bytes_done=0))

    beating = asyncio.create_task(beat())
    working = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(working)
    except asyncio.CancelledError:
        await asyncio.wait([working])
        raise
    finally:
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating


async def run_push(session: ServerSession, dataset: DatasetRepository, server: ServerState) -> None:
    """Drive one push session to its end (errors propagate to the caller, which reports them)."""
    settings = server.settings
    request = await session.expect(DatasetPushRequest)
    state, accepted = await asyncio.to_thread(_accept, dataset, request)
    await session.send(accepted)
    tarball = await session.expect(MetadataTarball)
    await asyncio.to_thread(_attach, dataset, state, request, tarball.data)
    # Blocks are invisible until head moves, so write their pack (one store write) while the client
    # uploads the objects (a failed push leaves it for gc, like its objects).
    writing = asyncio.create_task(asyncio.to_thread(dataset.store_blocks, state.bundle.blocks, state.bundle.pack))
    writing.add_done_callback(lambda task: task.cancelled() or task.exception())
    await session.send(
        DatasetPushMetadataAccepted(
            num_blocks=len(state.bundle.blocks),
            num_objects=len(state.required),
            max_objects_per_page=settings.max_objects_per_page,
        )
    )
    while isinstance(
        message := await session.expect(DatasetPushObjectsTransferRequest, DatasetPushComplete),
        DatasetPushObjectsTransferRequest,
    ):
        check_page(message.object_files, settings)
        transfers = await asyncio.to_thread(_negotiate, dataset, state, message.object_files, settings)
        server.metrics.urls_signed.labels("PUT").inc(sum(isinstance(t.transfer, HttpUpload) for t in transfers))
        await session.send(DatasetPushObjectsTransferResponse(object_transfers=transfers))
    await writing
    committing = asyncio.to_thread(_verify_and_commit, dataset, state)
    new_tip = await _with_keep_alive(session, committing, settings.keepalive_interval_seconds)
    old_head = str(state.remote_tip.head) if state.remote_tip is not None else None
    await session.send(DatasetPushCompleteConfirmed(old_head=old_head, new_head=str(new_tip.head)))
    await session.close()
