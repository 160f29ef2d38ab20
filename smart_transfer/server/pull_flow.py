"""The server side of a pull: plan, send the metadata tarball, hand out presigned GETs page by page."""

from __future__ import annotations

import asyncio

from smart_transfer.model import ChainTip, Multihash
from smart_transfer.protocol.errors import ErrorCode, ProtocolError
from smart_transfer.protocol.messages import (
    DatasetPullComplete,
    DatasetPullMetadataRequest,
    DatasetPullObjectsTransferRequest,
    DatasetPullObjectsTransferResponse,
    DatasetPullRequest,
    DatasetPullResponse,
    HttpRequest,
    ObjectFile,
    Progress,
    PullObjectTransfer,
    TransferPlan,
)
from smart_transfer.protocol.tarball import pack_blocks
from smart_transfer.repo.dataset import DatasetRepository, ObjectRef, committed_refs
from smart_transfer.repo.layout import ObjectKind
from smart_transfer.server.session import ServerSession
from smart_transfer.server.settings import ServerSettings


def object_ref(item: ObjectFile) -> ObjectRef:
    return ObjectRef(ObjectKind(item.kind), Multihash.parse(item.physical_hash), item.size)


def check_page(items: list[ObjectFile], settings: ServerSettings) -> None:
    if len(items) > settings.max_objects_per_page:
        raise ProtocolError(
            ErrorCode.TOO_MANY_OBJECTS,
            f"{len(items)} objects in one page; at most {settings.max_objects_per_page}",
            {"max_objects_per_page": settings.max_objects_per_page},
        )


def _plan(
    dataset: DatasetRepository, request: DatasetPullRequest
) -> tuple[ChainTip, Multihash | None, list[tuple[Multihash, bytes]], list[ObjectRef], dict[Multihash, bytes]]:
    """Decide what the pull moves (runs in a worker thread: it reads the index and maybe the store)."""
    tip = dataset.tip()
    if tip is None:
        raise ProtocolError(ErrorCode.DATASET_NOT_FOUND, f"dataset {dataset.name} does not exist")
    target = tip
    if request.stop_at is not None:
        found = dataset.chain_tip_at(Multihash.parse(request.stop_at))
        if found is None:
            raise ProtocolError(ErrorCode.INVALID_INTERVAL, f"stop_at {request.stop_at} is not on the chain")
        target = found
    begin_after = Multihash.parse(request.begin_after) if request.begin_after is not None else None
    if begin_after is not None:
        seq = dataset.sequence_of(begin_after)
        if seq is None:
            if not request.force_update_if_diverged:
                raise ProtocolError(
                    ErrorCode.DIVERGED,
                    f"block {begin_after} is not on the remote chain of {dataset.name}: the histories diverged",
                    {"remote_head": str(tip.head), "begin_after": str(begin_after)},
                )
            begin_after = None  # forced: send the whole chain; the client replaces its own
        elif seq > target.sequence_number:
            raise ProtocolError(
                ErrorCode.INVALID_INTERVAL,
                f"begin_after (block {seq}) comes after stop_at (block {target.sequence_number})",
                {"remote_head": str(tip.head)},
            )
    blocks = list(dataset.blocks_after(target, begin_after))
    refs = committed_refs(data for _, data in blocks)
    manifests = dataset.manifests_of(refs)
    seen = {(r.kind, r.physical_hash) for r in refs}
    for manifest in manifests.values():  # each checkpoint's files travel as objects too
        for item in manifest.files:
            if (ObjectKind.CHECKPOINT, item.physical_hash) not in seen:
                seen.add((ObjectKind.CHECKPOINT, item.physical_hash))
                refs.append(ObjectRef(ObjectKind.CHECKPOINT, item.physical_hash, item.size))
    return target, begin_after, blocks, refs, {h: m.encode() for h, m in manifests.items()}


async def run_pull(session: ServerSession, dataset: DatasetRepository, settings: ServerSettings) -> None:
    """Drive one pull session to its end (errors propagate to the caller, which reports them)."""
    request = await session.receive_expected(DatasetPullRequest)
    assert isinstance(request, DatasetPullRequest)
    target, begin_after, blocks, refs, manifests = await asyncio.to_thread(_plan, dataset, request)
    plan = TransferPlan(num_blocks=len(blocks), num_objects=len(refs), bytes_in_objects=sum(r.size for r in refs))
    await session.send(
        DatasetPullResponse(
            head=str(target.head),
            begin_after=str(begin_after) if begin_after else None,
            transfer_plan=plan,
            max_objects_per_page=settings.max_objects_per_page,
        )
    )
    message = await session.receive_expected(DatasetPullMetadataRequest, DatasetPullComplete)
    if isinstance(message, DatasetPullComplete):
        await session.close()
        return
    await session.send_tarball(await asyncio.to_thread(pack_blocks, blocks, manifests.items()))
    while True:
        message = await session.receive_expected(DatasetPullObjectsTransferRequest, Progress, DatasetPullComplete)
        if isinstance(message, DatasetPullComplete):
            await session.close()
            return
        if isinstance(message, DatasetPullObjectsTransferRequest):
            check_page(message.object_files, settings)
            transfers = await asyncio.to_thread(_presign_downloads, dataset, message.object_files, settings)
            await session.send(DatasetPullObjectsTransferResponse(object_transfers=transfers))


def _presign_downloads(
    dataset: DatasetRepository, items: list[ObjectFile], settings: ServerSettings
) -> list[PullObjectTransfer]:
    transfers = []
    for item in items:
        ref = object_ref(item)
        # only objects of this dataset's committed chain: never a URL for an arbitrary key
        if not dataset.has_object(ref):
            raise ProtocolError(
                ErrorCode.OBJECT_NOT_ALLOWED,
                f"{item.kind}/{item.physical_hash} ({item.size} bytes) is not an object of {dataset.name}",
                {"object": item.physical_hash},
            )
        signed = dataset.store.presign_get(dataset.object_key(ref), settings.url_ttl_seconds)
        transfers.append(
            PullObjectTransfer(
                object_file=item,
                download=HttpRequest(
                    method="GET", url=signed.url, headers=signed.headers, expires_at=signed.expires_at
                ),
            )
        )
    return transfers
