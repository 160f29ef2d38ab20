"""Simple-protocol reads: a dataset's description, its head, blocks and objects (on S3 objects answer
with a redirect to a short-lived presigned GET unless ``?redirect=false``; range requests, strong
ETags and ``If-None-Match`` everywhere)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import PlainTextResponse, RedirectResponse, Response, StreamingResponse

from smart_transfer.config.values import LONG_MAX, BadValue, whole_number
from smart_transfer.model import Multihash, ObjectKind, ObjectRef
from smart_transfer.model.multihash import HASH_PATTERN
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import ProtocolError, RangeNotSatisfiableDetails
from smart_transfer.protocol.rest import BlockPosition, DatasetInfo, ObjectTotals
from smart_transfer.repo import Repository
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.errors import DatasetNotFound
from smart_transfer.repo.repository import per_dataset
from smart_transfer.server.rest_common import (
    BINARY,
    DatasetParam,
    HashParam,
    KindParam,
    State,
    dataset_of,
    error_responses,
    get_and_head,
    guard,
    object_kind,
)
from smart_transfer.server.signer import committed_size

router = APIRouter(tags=["simple protocol"], dependencies=[Depends(guard)])
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


async def run(function: Any, *args: Any) -> Any:
    return await asyncio.to_thread(function, *args)


def describe(repo: DatasetRepository, block: str | None) -> DatasetInfo:
    """A dataset as `GET /{dataset}` describes it (syncing the index to its head first); with
    ``block``, where that block is on the chain."""
    tip = repo.require_tip()
    position = None
    if block is not None:
        position = BlockPosition(hash=block, sequence_number=repo.sequence_of(Multihash.parse(block)))
    totals = {kind: [0, 0] for kind in ObjectKind}
    for kind, _, size in repo.committed_objects():
        totals[kind][0] += 1
        totals[kind][1] += size
    data, checkpoints = totals[ObjectKind.DATA], totals[ObjectKind.CHECKPOINT]
    return DatasetInfo(
        name=repo.name,
        dataset_id=tip.dataset_id,
        head=str(tip.head),
        blocks=tip.sequence_number + 1,
        records=tip.next_offset,
        data=ObjectTotals(count=data[0], bytes=data[1]),
        checkpoints=ObjectTotals(count=checkpoints[0], bytes=checkpoints[1]),
        block=position,
    )


def describe_many(repository: Repository, names: list[str]) -> list[DatasetInfo]:
    """``describe`` of each of ``names`` (HEAD_READS_PARALLEL at a time: on S3 each reads its head); one
    deleted since it was listed is left out."""

    def described(name: str) -> DatasetInfo | None:
        try:
            return describe(repository.dataset(name), None)
        except DatasetNotFound:
            return None

    return [info for info in per_dataset(described, names) if info is not None]


@router.get(
    "/{dataset}",
    operation_id="describeDataset",
    summary="Describe a dataset",
    response_model=DatasetInfo,
    responses=error_responses(ErrorCode.INVALID_DATASET_NAME, ErrorCode.INVALID_REQUEST, ErrorCode.DATASET_NOT_FOUND),
)
async def describe_dataset(
    dataset: DatasetParam,
    state: State,
    block: Annotated[
        str | None,
        Query(
            pattern=HASH_PATTERN,
            description="a block hash (a client's head): the answer says whether and where it is on the chain",
        ),
    ] = None,
) -> DatasetInfo:
    info: DatasetInfo = await run(describe, dataset_of(state, dataset), block)
    return info


@get_and_head(
    router,
    "/{dataset}/refs/head",
    "readHead",
    summary="The dataset's head block hash (text)",
    response_class=PlainTextResponse,
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
        **error_responses(ErrorCode.INVALID_DATASET_NAME, ErrorCode.DATASET_NOT_FOUND),
    },
)
async def read_head(dataset: DatasetParam, state: State) -> Response:
    repo = dataset_of(state, dataset)
    head = await run(repo.head)
    if head is None:
        raise ProtocolError(ErrorCode.DATASET_NOT_FOUND, f"dataset {repo.name} does not exist")
    return PlainTextResponse(str(head), headers={"ETag": f'"{head}"', "Cache-Control": "no-store"})


def _block(repo: DatasetRepository, wanted: Multihash) -> bytes:
    # content-addressed: cached bytes are valid whatever the head; sync only on a miss
    data = repo.cached_block(wanted, resync=True)
    if data is None:  # on no chain (a push in flight, REST uploads): packs not cached yet, read once
        data = repo.find_block(wanted)
    if data is None:
        raise ProtocolError(ErrorCode.BLOCK_NOT_FOUND, f"no block {wanted} in {repo.name}")
    return data


@get_and_head(
    router,
    "/{dataset}/blocks/{block_hash}",
    "readBlock",
    summary="A metadata block's canonical bytes",
    response_class=Response,
    responses={
        200: {"content": BINARY},
        **error_responses(
            ErrorCode.INVALID_DATASET_NAME,
            ErrorCode.INVALID_HASH,
            ErrorCode.DATASET_NOT_FOUND,
            ErrorCode.BLOCK_NOT_FOUND,
        ),
    },
)
async def read_block(dataset: DatasetParam, block_hash: HashParam, state: State) -> Response:
    wanted = Multihash.parse(block_hash)
    data = await run(_block, dataset_of(state, dataset), wanted)
    headers = {"ETag": f'"{wanted}"', "Cache-Control": "immutable"}
    return Response(data, media_type="application/octet-stream", headers=headers)


def _etag_matches(header: str | None, value: str) -> bool:
    if header is None:
        return False
    candidates = {part.strip().removeprefix("W/").strip('"') for part in header.split(",")}
    return "*" in candidates or value in candidates


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The single range asked for (inclusive), None for the whole object; RangeNotSatisfiable if it
    cannot be served. Multi-ranges and unknown units get the whole object (allowed by RFC 9110)."""
    match = _RANGE.fullmatch(header.strip()) if header is not None else None
    if match is None:
        return None
    unsatisfiable = ProtocolError(
        ErrorCode.RANGE_NOT_SATISFIABLE, f"object has {size} bytes", RangeNotSatisfiableDetails(size=size)
    )
    try:  # the one rule: a position past a Long is past every object, read by its length alone
        first, last = (whole_number(part, "a byte position", 0, LONG_MAX) if part else None for part in match.groups())
    except BadValue:
        raise unsatisfiable from None
    if first is None:
        if not last:
            raise unsatisfiable
        start, end = max(size - last, 0), size - 1
    else:
        start, end = first, (last if last is not None else size - 1)
    end = min(end, size - 1)
    if start >= size or start > end:
        raise unsatisfiable
    return start, end


async def _chunks(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    sentinel = b""
    while chunk := await asyncio.to_thread(next, chunks, sentinel):
        yield chunk


@get_and_head(
    router,
    "/{dataset}/{kind}/{object_hash}",
    "readObject",
    summary="A committed object (data slice or checkpoint): redirect to storage, or streamed",
    response_class=Response,
    responses={
        200: {"content": BINARY},
        206: {"content": BINARY, "description": "the requested range"},
        304: {"description": "not modified (If-None-Match matched)"},
        307: {"description": "fetch it from storage at Location (a short-lived presigned URL)"},
        **error_responses(
            ErrorCode.INVALID_DATASET_NAME,
            ErrorCode.INVALID_HASH,
            ErrorCode.NO_SUCH_ROUTE,
            ErrorCode.DATASET_NOT_FOUND,
            ErrorCode.OBJECT_NOT_FOUND,
            ErrorCode.RANGE_NOT_SATISFIABLE,
            ErrorCode.STORAGE_UNAVAILABLE,
        ),
    },
)
async def read_object(
    dataset: DatasetParam,
    kind: KindParam,
    object_hash: HashParam,
    request: Request,
    state: State,
    redirect: Annotated[bool, Query(description="redirect to a presigned storage URL when the store has one")] = True,
    range_header: Annotated[str | None, Header(alias="range")] = None,
    if_none_match: Annotated[str | None, Header()] = None,
) -> Response:
    """One object a committed block references. Which objects to read is the client's choice: a partial
    pull (the latest checkpoint's files only, the data slices of a range of blocks, a time or the last N
    records, or none) walks the whole chain from `refs/head` and `blocks/{hash}` and reads only the
    objects it wants; the server keeps no record of it. A HEAD says whether the server holds the object
    committed (200 or 307; 404 when not, also for a copy a push stored but has not committed): a push of
    blocks whose objects the client does not hold (after a partial pull) asks it before any upload."""
    repo = dataset_of(state, dataset)
    object_type, wanted = object_kind(kind), Multihash.parse(object_hash)
    size: int = await run(committed_size, repo, object_type, wanted)
    ref = ObjectRef(object_type, wanted, size)
    key = repo.object_key(ref)
    headers = {"ETag": f'"{wanted}"', "Accept-Ranges": "bytes", "Cache-Control": "immutable"}
    if _etag_matches(if_none_match, str(wanted)):
        return Response(status_code=304, headers=headers)
    if redirect and repo.store.supports_presigning and not repo.store.served_by_owner:
        signed = await run(state.signer.get, repo, ref, state.settings.url_ttl_seconds)
        return RedirectResponse(signed.url, status_code=307, headers={"Cache-Control": "no-store"})
    span = byte_range(range_header, size)
    start, end = span if span is not None else (0, size - 1)
    length = end - start + 1 if size else 0
    headers["Content-Length"] = str(length)
    if span is not None:
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
    status = 206 if span is not None else 200
    if request.method == "HEAD" or length == 0:
        return Response(status_code=status, headers=headers, media_type="application/octet-stream")
    chunks: Iterator[bytes] = await run(repo.store.stream, key, start, end)
    state.count_object_bytes(length)
    return StreamingResponse(
        _chunks(chunks), status_code=status, headers=headers, media_type="application/octet-stream"
    )
