"""One object's move, each way: a download into the workspace (verified before it is put into place) and
an upload from it. ``moving.move_objects`` calls these for every object of a pull or a push, and a pull's
peers call ``download_from``: the job travels down into them, and nothing calls back up into the flows."""

from __future__ import annotations

import asyncio
from pathlib import Path

from smart_transfer.client.flows.job import FlowJob
from smart_transfer.client.flows.moving import Meter, Wire
from smart_transfer.errors import LocalError
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.messages import HttpRequest, MultipartUpload, ObjectFile
from smart_transfer.transfer.limits import INLINE_WRITE_BYTES, SMALL_OBJECT_BYTES, Timeouts
from smart_transfer.transfer.mover import Transfer
from smart_transfer.transfer.transport import ObjectTransport


async def download(job: FlowJob, wire: Wire, item: ObjectFile, transfer: Transfer, meter: Meter) -> int:
    """GET one object where the channel's URL says (storage, or the server on the simple protocol):
    ``download_from`` over the move's transport and transfer slots."""
    return await download_from(job, job.timeouts, wire.transport, item, transfer, meter, wire.slots)


async def download_from(
    job: FlowJob,
    timeouts: Timeouts,
    transport: ObjectTransport,
    item: ObjectFile,
    transfer: Transfer,
    meter: Meter,
    slots: asyncio.Semaphore | None = None,
) -> int:
    """GET one object over ``transport`` into the workspace, verified (hash and size) before it is put
    into place: a small object through memory (written on the event loop up to INLINE_WRITE_BYTES), a
    large one (given transfer ``slots``) as parallel ranges in a staging file kept per object, so a
    killed pull resumes it range by range, anything else streamed through a file. Returns the bytes
    moved."""
    from smart_transfer.transfer.http import download as get  # the HTTP stack loads on use
    from smart_transfer.transfer.http import download_bytes
    from smart_transfer.transfer.ranges import RangedDownload, download_ranges

    ref = item.ref()
    if not isinstance(transfer, HttpRequest):
        raise LocalError(ErrorCode.BAD_MESSAGE, f"{ref.label}: a download needs one URL, not parts")
    store = job.workspace.local_store
    key = job.dataset.object_key(ref)
    received = 0

    def on_bytes(count: int) -> None:
        nonlocal received
        received += count
        meter.add_bytes(count)

    try:
        if ref.size <= SMALL_OBJECT_BYTES:
            data = await download_bytes(transport, transfer, ref.physical_hash, ref.size, on_bytes, timeouts)
            if ref.size <= INLINE_WRITE_BYTES:
                # a few KiB cost less to write here than to hand to a worker thread (measured: a
                # 2,000-object pull spent more in thread wake-ups than in the writes)
                store.put(key, data)
            else:
                await asyncio.to_thread(store.put, key, data)
            return ref.size
        large = job.settings.large
        if slots is not None and ref.size > large.range_threshold:
            ranged = RangedDownload(transfer, ref.physical_hash, ref.size, store.staging_path(key))
            verified = await download_ranges(transport, ranged, large, on_bytes, timeouts, slots)
        else:
            verified = await get(
                transport, transfer, ref.physical_hash, ref.size, store.temp_path(), on_bytes, timeouts
            )
    except BaseException:
        meter.add_bytes(-received)  # progress counts what stayed
        raise
    # verified: renamed into place (no MD5 of it is computed: a push hashes what it sends)
    await asyncio.to_thread(store.move_into_place, key, verified.temp_path)
    return verified.moved


async def upload(job: FlowJob, wire: Wire, item: ObjectFile, transfer: Transfer, meter: Meter) -> int:
    """PUT one object of the workspace to where ``transfer`` says: one request, or its parts in
    parallel. Returns the bytes moved."""
    # the HTTP stack loads here, once an object moves: a push with nothing to upload never pays for it
    from smart_transfer.transfer.http import upload as put
    from smart_transfer.transfer.multipart import upload_parts

    path: Path = job.workspace.local_store.path_of(job.dataset.object_key(item.ref()))
    if isinstance(transfer, MultipartUpload):
        return await upload_parts(
            wire.transport,
            transfer,
            item.physical_hash,
            path,
            meter.add_bytes,
            parallel=job.settings.large.parallel_parts,
            timeouts=job.timeouts,
            slots=wire.slots,
        )
    return await put(wire.transport, transfer, item.physical_hash, path, meter.add_bytes, job.timeouts, item.size)
