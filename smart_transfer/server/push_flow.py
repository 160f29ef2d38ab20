"""The server side of a push: check the expected head, validate the new blocks, negotiate uploads
(SkipUpload from the index or one listing, never a HEAD per object), verify every new object's size
and MD5 at completion, then move head by compare-and-swap."""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass, field

from smart_transfer.checkpoint.manifest import CheckpointManifest, decode_manifest
from smart_transfer.model import ChainTip, ModelError, Multihash, validate_extension
from smart_transfer.model.events import Seed
from smart_transfer.protocol.errors import ErrorCode, ProtocolError
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
from smart_transfer.protocol.tarball import unpack_blocks
from smart_transfer.repo import HeadMoved
from smart_transfer.repo.dataset import DatasetRepository, NewBlock, ObjectRef, checkpoint_refs, objects_of
from smart_transfer.repo.layout import ObjectKind, object_prefix
from smart_transfer.server.pull_flow import check_page, object_ref
from smart_transfer.server.session import ServerSession
from smart_transfer.server.settings import ServerSettings
from smart_transfer.storage import ObjectInfo

#: How many failing objects an UploadInvalid error lists.
MAX_LISTED_FAILURES = 20


@dataclass
class PushState:
    """What one push session has learned so far."""

    remote_tip: ChainTip | None
    base: ChainTip | None = None
    blocks: list[NewBlock] = field(default_factory=list)
    required: dict[tuple[ObjectKind, Multihash], ObjectRef] = field(default_factory=dict)
    promised_md5: dict[tuple[ObjectKind, Multihash], str] = field(default_factory=dict)
    manifests: dict[Multihash, CheckpointManifest] = field(default_factory=dict)
    listing: dict[str, ObjectInfo] | None = None


def _md5_hex(md5_base64: str) -> str:
    return base64.b64decode(md5_base64).hex()


def _attach(dataset: DatasetRepository, state: PushState, request: DatasetPushRequest, data: bytes) -> None:
    """Decode and validate the pushed blocks on top of the chain they attach to (worker thread)."""
    bundle = unpack_blocks(data)
    try:
        blocks = [NewBlock.decode(content) for _, content in bundle.blocks]
        state.manifests = {h: decode_manifest(content) for h, content in bundle.manifests.items()}
    except ModelError as exc:
        raise ProtocolError(ErrorCode.INVALID_BLOCKS, f"a pushed block or manifest is malformed: {exc}") from None
    for ref in checkpoint_refs(blocks):
        content = bundle.manifests.get(ref.physical_hash)
        if content is None or len(content) != ref.size:
            raise ProtocolError(
                ErrorCode.INVALID_BLOCKS,
                f"the manifest of checkpoint {ref.physical_hash} is missing from the tarball or of the wrong size",
            )
    tip = state.remote_tip
    if not blocks:
        state.base = tip
        return
    first = blocks[0].block
    if tip is not None and first.prev_block_hash != tip.head:
        if not request.force_update_if_diverged:
            raise ProtocolError(
                ErrorCode.INVALID_BLOCKS,
                "the pushed blocks do not extend the remote head",
                {"remote_head": str(tip.head)},
            )
        # forced: the blocks attach to a block on our chain, or replace the chain from its Seed
        if first.prev_block_hash is None:
            seed = first.event
            if not isinstance(seed, Seed) or seed.dataset_id != tip.dataset_id:
                raise ProtocolError(
                    ErrorCode.SEED_MISMATCH,
                    f"force never replaces a dataset with a different Seed (remote is {tip.dataset_id})",
                    {"remote_dataset_id": tip.dataset_id},
                )
            state.base = None
        else:
            state.base = dataset.chain_tip_at(first.prev_block_hash)
            if state.base is None:
                raise ProtocolError(
                    ErrorCode.INVALID_BLOCKS, "the pushed blocks attach to no block of the remote chain"
                )
    else:
        state.base = tip
    try:
        validate_extension(state.base, ((b.hash, b.block) for b in blocks))
    except ModelError as exc:
        raise ProtocolError(ErrorCode.INVALID_BLOCKS, str(exc)) from None
    state.blocks = blocks
    for ref in objects_of(blocks, state.manifests):
        state.required[(ref.kind, ref.physical_hash)] = ref


def list_objects(dataset: DatasetRepository) -> dict[str, ObjectInfo]:
    """One listing per kind: what the store holds for this dataset (pages of 1000 keys on S3)."""
    listing: dict[str, ObjectInfo] = {}
    for kind in ObjectKind:
        for info in dataset.store.list(object_prefix(dataset.name, kind)):
            listing[info.key] = info
    return listing


def _negotiate(
    dataset: DatasetRepository, state: PushState, items: list[ObjectFile], settings: ServerSettings
) -> list[PushObjectTransfer]:
    transfers: list[PushObjectTransfer] = []
    for item in items:
        ref = object_ref(item)
        key = (ref.kind, ref.physical_hash)
        if state.required.get(key) != ref:
            raise ProtocolError(
                ErrorCode.OBJECT_NOT_ALLOWED,
                f"{item.kind}/{item.physical_hash} ({item.size} bytes) is not referenced by the pushed blocks",
                {"object": item.physical_hash},
            )
        if item.md5 is None:
            raise ProtocolError(ErrorCode.BAD_MESSAGE, f"object {item.physical_hash} needs its md5 for upload")
        state.promised_md5[key] = item.md5
        if dataset.has_object(ref):
            transfers.append(PushObjectTransfer(object_file=item, transfer=SkipUpload()))
            continue
        if state.listing is None:
            state.listing = list_objects(dataset)
        listed = state.listing.get(dataset.object_key(ref))
        if listed is not None and listed.size == ref.size and listed.etag == _md5_hex(item.md5):
            # uploaded by an earlier, unfinished push: verified by size and MD5, so not sent again
            transfers.append(PushObjectTransfer(object_file=item, transfer=SkipUpload()))
            continue
        signed = dataset.store.presign_put(dataset.object_key(ref), settings.url_ttl_seconds, content_md5=item.md5)
        request = HttpRequest(method="PUT", url=signed.url, headers=signed.headers, expires_at=signed.expires_at)
        transfers.append(PushObjectTransfer(object_file=item, transfer=HttpUpload(request=request)))
    return transfers


def _verify_and_commit(dataset: DatasetRepository, state: PushState) -> ChainTip | None:
    """Check every required object (size and MD5 against the store), then CAS head (worker thread)."""
    pending = [(key, ref) for key, ref in state.required.items() if not dataset.has_object(ref)]
    failures: list[str] = []
    if pending:
        listing = list_objects(dataset)
        for key, ref in pending:
            info = listing.get(dataset.object_key(ref))
            md5 = state.promised_md5.get(key)
            if info is None:
                failures.append(f"{ref.kind.value}/{ref.physical_hash}: missing")
            elif info.size != ref.size:
                failures.append(f"{ref.kind.value}/{ref.physical_hash}: {info.size} bytes, expected {ref.size}")
            elif md5 is None or info.etag != _md5_hex(md5):
                failures.append(f"{ref.kind.value}/{ref.physical_hash}: content does not match the promised MD5")
    if failures:
        raise ProtocolError(
            ErrorCode.UPLOAD_INVALID,
            f"{len(failures)} object(s) missing or wrong; head not moved. First: {failures[0]}",
            {"objects": failures[:MAX_LISTED_FAILURES], "count": len(failures)},
        )
    if not state.blocks:
        return state.remote_tip
    expected = state.remote_tip.head if state.remote_tip is not None else None
    try:
        return dataset.commit(expected, state.base, state.blocks, state.manifests, blocks_stored=True)
    except HeadMoved as exc:
        raise ProtocolError(
            ErrorCode.INVALID_HEAD,
            f"another push moved the head of {dataset.name} first; pull and try again",
            {"expected": exc.expected, "actual": exc.actual},
        ) from None


async def run_push(session: ServerSession, dataset: DatasetRepository, settings: ServerSettings) -> None:
    """Drive one push session to its end (errors propagate to the caller, which reports them)."""
    request = await session.receive_expected(DatasetPushRequest)
    assert isinstance(request, DatasetPushRequest)
    tip = await asyncio.to_thread(dataset.tip)
    actual = str(tip.head) if tip is not None else None
    if request.current_head != actual and not request.force_update_if_diverged:
        raise ProtocolError(
            ErrorCode.INVALID_HEAD,
            f"remote head of {dataset.name} is {actual or 'absent'}, not {request.current_head or 'absent'}",
            {"expected": request.current_head, "actual": actual},
        )
    state = PushState(remote_tip=tip)
    await session.send(DatasetPushRequestAccepted(current_head=actual))
    tarball = await session.receive()
    assert isinstance(tarball, MetadataTarball)
    await asyncio.to_thread(_attach, dataset, state, request, tarball.data)
    # Blocks are invisible until head moves, so write them while the client uploads the objects
    # (a failed push leaves them for gc, like its objects).
    writing = asyncio.create_task(asyncio.to_thread(dataset.stage_blocks, state.blocks))
    writing.add_done_callback(lambda task: task.cancelled() or task.exception())
    await session.send(
        DatasetPushMetadataAccepted(
            num_blocks=len(state.blocks),
            num_objects=len(state.required),
            max_objects_per_page=settings.max_objects_per_page,
        )
    )
    while True:
        message = await session.receive_expected(DatasetPushObjectsTransferRequest, Progress, DatasetPushComplete)
        if isinstance(message, DatasetPushObjectsTransferRequest):
            check_page(message.object_files, settings)
            transfers = await asyncio.to_thread(_negotiate, dataset, state, message.object_files, settings)
            await session.send(DatasetPushObjectsTransferResponse(object_transfers=transfers))
        elif isinstance(message, DatasetPushComplete):
            break
    skipped_blocks = await writing
    await asyncio.to_thread(dataset.ensure_blocks_stored, skipped_blocks)
    new_tip = await asyncio.to_thread(_verify_and_commit, dataset, state)
    new_head = str(new_tip.head) if new_tip is not None else None
    if new_head is None:
        raise ProtocolError(ErrorCode.INVALID_BLOCKS, "nothing to commit to a dataset that does not exist")
    await session.send(DatasetPushCompleteConfirmed(old_head=actual, new_head=new_head))
    await session.close()
