"""The server side of a push: check the expected head, attach the new blocks (sync.attach), negotiate
uploads (SkipUpload from the index or one listing, never a HEAD per object; a presigned PUT, or for
a large object a multipart upload with one presigned PUT per missing part, see sync.multipart; an
offer without MD5s only asks whether the object is committed: SkipUpload or NotHeld), then
complete the multipart uploads and the verified commit (sync.commit), sending keep-alives meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

from smart_transfer.model import ChainTip, Multihash, ObjectRef
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import MessageTooLargeDetails, ObjectDetails, ProtocolError, TooManyObjectsDetails
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
    MultipartUpload,
    NotHeld,
    ObjectFile,
    Progress,
    PushObjectTransfer,
    SkipUpload,
    UploadPart,
)
from smart_transfer.protocol.tarball import DEFAULT_MAX_BLOCKS, expanded_bound
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.server.pull_flow import check_page
from smart_transfer.server.session import ServerSession
from smart_transfer.server.settings import ServerSettings
from smart_transfer.server.state import ServerState
from smart_transfer.storage import ObjectInfo
from smart_transfer.storage.base import stored_as_promised
from smart_transfer.storage.digest import md5_base64_from_hex, md5_hex_from_base64
from smart_transfer.storage.parts import MAX_PARTS
from smart_transfer.sync.attach import check_expected_head, last_common, place_push
from smart_transfer.sync.bundle import Bundle, bundle_from_tarball
from smart_transfer.sync.commit import ObjectKey, commit_chain, uncommitted_heads, upload_invalid, verify_uploads
from smart_transfer.sync.multipart import PartsPromise, complete, promise_of, resume_or_start

T = TypeVar("T")


@dataclass
class PushState:
    """What one push session has learned so far."""

    remote_tip: ChainTip | None
    base: ChainTip | None = None
    bundle: Bundle = field(default_factory=Bundle)
    #: The ETag each object negotiated for upload must have: its MD5, or its parts' multipart ETag.
    promised_etags: dict[ObjectKey, str] = field(default_factory=dict)
    #: Multipart uploads handed out, by store key: the upload and the parts promised.
    uploads: dict[str, tuple[str, PartsPromise, ObjectRef]] = field(default_factory=dict)
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
    bound = expanded_bound(plan.num_blocks, plan.num_objects, plan.bytes_in_objects)
    # the plan's count is an upper bound (the blocks after the common block are some of those planned)
    bundle = bundle_from_tarball(data, bound, min(plan.num_blocks, DEFAULT_MAX_BLOCKS), dataset.page_source)
    target = Multihash.parse(request.target_head) if request.target_head else None
    state.base = place_push(dataset, state.remote_tip, bundle.blocks, target, request.force_update_if_diverged)
    state.bundle = bundle
    state.required = {(r.kind, r.physical_hash): r for r in bundle.objects()}


def check_parts(items: list[ObjectFile]) -> None:
    """One answer carries at most MAX_PARTS part URLs: a page names at most that many parts in all."""
    count = sum(len(item.part_md5s or ()) for item in items)
    if count > MAX_PARTS:
        raise ProtocolError(
            ErrorCode.TOO_MANY_OBJECTS,
            f"{count} parts in one page; at most {MAX_PARTS} (put large objects in pages of their own)",
            TooManyObjectsDetails(max_objects_per_page=len(items)),
        )


def _required(state: PushState, item: ObjectFile, settings: ServerSettings) -> ObjectRef:
    ref = item.ref()
    if state.required.get((ref.kind, ref.physical_hash)) != ref:
        raise ProtocolError(
            ErrorCode.OBJECT_NOT_ALLOWED,
            f"{item.kind}/{item.physical_hash} ({item.size} bytes) is not referenced by the pushed blocks",
            ObjectDetails(object=item.physical_hash),
        )
    if ref.size > settings.max_object_bytes:
        raise ProtocolError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"{item.kind}/{item.physical_hash} has {ref.size} bytes; this server takes objects of at most "
            f"{settings.max_object_bytes}",
            MessageTooLargeDetails(limit=settings.max_object_bytes),
        )
    return ref


def _multipart(
    dataset: DatasetRepository, state: PushState, ref: ObjectRef, promise: PartsPromise, server: ServerState
) -> MultipartUpload:
    """The upload of a large object: the one this session or an interrupted one started, with a URL
    for each promised part the store does not hold yet."""
    key = dataset.object_key(ref)
    known = state.uploads.get(key)
    upload_id, missing = resume_or_start(dataset.store, key, promise, known[0] if known else None)
    state.uploads[key] = (upload_id, promise, ref)
    parts = []
    for part in missing:
        md5 = md5_base64_from_hex(promise.md5s[part.number - 1])
        signed = server.signer.put_part(dataset, ref, (upload_id, part.number), md5, server.settings.url_ttl_seconds)
        parts.append(UploadPart(part_number=part.number, request=HttpRequest.presigned(signed)))
    return MultipartUpload(upload_id=upload_id, part_size=promise.parts[0].length, parts=parts)


def _negotiate(
    dataset: DatasetRepository, state: PushState, items: list[ObjectFile], server: ServerState
) -> list[PushObjectTransfer]:
    check_parts(items)
    refs = [_required(state, item, server.settings) for item in items]
    heads = uncommitted_heads(dataset, refs)  # a key it lacks is committed
    return [
        PushObjectTransfer(object_file=item, transfer=_transfer(dataset, state, item, ref, heads, server))
        for item, ref in zip(items, refs, strict=True)
    ]


def _transfer(
    dataset: DatasetRepository,
    state: PushState,
    item: ObjectFile,
    ref: ObjectRef,
    heads: dict[str, ObjectInfo | None],
    server: ServerState,
) -> SkipUpload | HttpUpload | MultipartUpload | NotHeld:
    """How one offered object is sent. An offer without MD5s only asks whether the object is committed:
    answered from the index (and the HEAD the page made anyway), changing nothing and promising nothing."""
    settings, key = server.settings, dataset.object_key(ref)
    if item.asks:
        info = heads.get(key)
        return SkipUpload() if key not in heads else NotHeld(stored=info is not None and info.size == ref.size)
    promise = promise_of(item, settings.multipart_threshold, settings.part_size)
    etag = promise.etag if promise is not None else md5_hex_from_base64(item.md5 or "")
    state.promised_etags[(ref.kind, ref.physical_hash)] = etag
    # stored already: committed, or uploaded by an earlier, unfinished push (size and promised ETag)
    if key not in heads or stored_as_promised(heads[key], ref.size, etag):
        return SkipUpload()
    if promise is not None:
        return _multipart(dataset, state, ref, promise, server)
    signed = server.signer.put(dataset, ref, settings.url_ttl_seconds, item.md5)
    return HttpUpload(request=HttpRequest.presigned(signed))


def _complete_uploads(dataset: DatasetRepository, state: PushState) -> None:
    """Assemble every object uploaded in parts (each part checked first); UploadInvalid if any fails."""
    failures = []
    for key, (upload_id, promise, ref) in state.uploads.items():
        problem = complete(dataset.store, key, upload_id, promise)
        if problem is not None:
            failures.append(f"{ref.label}: {problem}")
    if failures:
        raise upload_invalid(failures)


def _verify_and_commit(dataset: DatasetRepository, state: PushState, readback_limit: int) -> ChainTip:
    """Check every required object, then CAS head (worker thread; the blocks' pack is stored)."""
    _complete_uploads(dataset, state)
    verify_uploads(dataset, list(state.required.values()), state.promised_etags, readback_limit)
    if not state.bundle.blocks and state.base == state.remote_tip:  # neither new blocks nor a rewind
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


def _write_blocks(dataset: DatasetRepository, state: PushState) -> asyncio.Task[None]:
    """Write the pushed blocks' pack in a worker thread (awaited before the commit)."""
    writing = asyncio.create_task(asyncio.to_thread(dataset.store_blocks, state.bundle.blocks, state.bundle.pack))
    writing.add_done_callback(lambda task: task.cancelled() or task.exception())
    return writing


async def run_push(session: ServerSession, dataset: DatasetRepository, server: ServerState) -> None:
    """Drive one push session to its end (errors propagate to the caller, which reports them)."""
    settings = server.settings
    request = await session.expect(DatasetPushRequest)
    state, accepted = await asyncio.to_thread(_accept, dataset, request)
    await session.send(accepted)
    tarball = await session.expect(MetadataTarball)
    await asyncio.to_thread(_attach, dataset, state, request, tarball.data)
    # Blocks are invisible until head moves, so write their pack (one store write) while the client
    # uploads the objects, from its first page that offers an upload (a failed push leaves it for gc,
    # like its objects): a push that ends after asking what the server holds leaves no trace.
    writing: asyncio.Task[None] | None = None
    await session.send(
        DatasetPushMetadataAccepted(
            num_blocks=len(state.bundle.blocks),
            num_objects=len(state.required),
            max_objects_per_page=settings.max_objects_per_page,
            multipart_threshold=settings.multipart_threshold,
            part_size=settings.part_size,
        )
    )
    while isinstance(
        message := await session.expect(DatasetPushObjectsTransferRequest, DatasetPushComplete),
        DatasetPushObjectsTransferRequest,
    ):
        check_page(message.object_files, settings)
        transfers = await asyncio.to_thread(_negotiate, dataset, state, message.object_files, server)
        if writing is None and not all(item.asks for item in message.object_files):
            writing = _write_blocks(dataset, state)
        await session.send(DatasetPushObjectsTransferResponse(object_transfers=transfers))
    await (writing or _write_blocks(dataset, state))
    committing = asyncio.to_thread(_verify_and_commit, dataset, state, settings.verify_read_limit)
    new_tip = await _with_keep_alive(session, committing, settings.keepalive_interval_seconds)
    server.heads.notify(dataset.name)  # followers of this replica pull it now
    old_head = str(state.remote_tip.head) if state.remote_tip is not None else None
    await session.send(DatasetPushCompleteConfirmed(old_head=old_head, new_head=str(new_tip.head)))
    await session.close()
