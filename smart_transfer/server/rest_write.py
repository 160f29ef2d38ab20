"""Simple-protocol writes: blocks and objects whose bodies the server hashes (a mismatch stores
nothing), and head by compare-and-swap (``If-Match``) through the same verified commit as the smart
protocol (``sync.commit``). An uploaded object is *staged*: it becomes readable once a block that
references it is committed (202 Accepted says so; 200 when the same bytes were already stored)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from smart_transfer.model import ModelError, Multihash, ObjectKind, ObjectRef, decode_block
from smart_transfer.model.block import MAX_BLOCK_BYTES
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import MessageTooLargeDetails, ObjectDetails, ProtocolError
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.server.rest_common import (
    BINARY,
    DatasetParam,
    HashParam,
    KindParam,
    State,
    dataset_of,
    error_responses,
    guard,
    object_kind,
)
from smart_transfer.storage.base import stored_as_promised
from smart_transfer.storage.digest import Digester, FileDigest
from smart_transfer.sync.bundle import invalid_block
from smart_transfer.sync.commit import commit_uploaded

F = TypeVar("F", bound=Callable[..., Any])
router = APIRouter(tags=["simple protocol"], dependencies=[Depends(guard)])
#: Most bytes of a ``PUT refs/head`` body read (a hash is 69 characters).
MAX_HEAD_BODY_BYTES = 1024


class StoredObject(BaseModel):
    """What a PUT of a block or object stored."""

    hash: str
    size: int
    created: bool = Field(description="false when the same bytes were already stored")
    visible: bool = Field(description="readable now (blocks always; objects once a committed block references them)")


class HeadMovedTo(BaseModel):
    old_head: str | None
    new_head: str


async def _read_limited(request: Request, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ProtocolError(
                ErrorCode.MESSAGE_TOO_LARGE, f"body exceeds {limit} bytes", MessageTooLargeDetails(limit=limit)
            )
        chunks.append(chunk)
    return b"".join(chunks)


@router.put(
    "/{dataset}/refs/head",
    operation_id="writeHead",
    summary="Move head by compare-and-swap (If-Match: old head, or If-None-Match: * to create)",
    description="The new head's blocks must be uploaded (PUT blocks) and every object they reference too. "
    "Without force the new head must extend the current one (409 Diverged); with force=true it may replace "
    "the history after the last common block, or from the same Seed (409 SeedMismatch otherwise).",
    response_model=HeadMovedTo,
    responses=error_responses(
        ErrorCode.INVALID_DATASET_NAME,
        ErrorCode.INVALID_HASH,
        ErrorCode.INVALID_BLOCKS,
        ErrorCode.UPLOAD_INVALID,
        ErrorCode.DIVERGED,
        ErrorCode.SEED_MISMATCH,
        ErrorCode.INVALID_HEAD,
        ErrorCode.PRECONDITION_REQUIRED,
    ),
    openapi_extra={"requestBody": {"required": True, "content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def write_head(
    dataset: DatasetParam,
    request: Request,
    state: State,
    force: Annotated[bool, Query(description="replace a diverged history (same Seed only)")] = False,
    if_match: Annotated[str | None, Header()] = None,
    if_none_match: Annotated[str | None, Header()] = None,
) -> HeadMovedTo:
    repo = dataset_of(state, dataset)
    if if_match is None and (if_none_match or "").strip() != "*":
        raise ProtocolError(ErrorCode.PRECONDITION_REQUIRED, "send If-Match: <current head> (or If-None-Match: *)")
    expected = Multihash.parse(if_match.strip().strip('"')) if if_match is not None else None
    body = await _read_limited(request, MAX_HEAD_BODY_BYTES)
    new_head = Multihash.parse(body.decode("ascii", "replace").strip())
    new_tip = await asyncio.to_thread(
        commit_uploaded, repo, expected, new_head, force, state.settings.verify_read_limit
    )
    state.heads.notify(repo.name)  # followers of this replica pull it now
    return HeadMovedTo(old_head=str(expected) if expected else None, new_head=str(new_tip.head))


def _store_block(repo: DatasetRepository, wanted: Multihash, data: bytes) -> bool:
    # one object per block until the head move packs them (another replica may take that request)
    created = repo.blocks.write_single(wanted, data)
    repo.cache_blocks([(wanted, data)])
    return created


def _upload_route(
    path: str, operation_id: str, summary: str, status_code: int, already: str, *codes: ErrorCode
) -> Callable[[F], F]:
    """A PUT route that stores the binary body it is sent: ``status_code`` when it stores it, 200
    (described by ``already``) when the same bytes were stored before, else one of ``codes``."""
    return router.put(
        path,
        operation_id=operation_id,
        summary=summary,
        status_code=status_code,
        response_model=StoredObject,
        responses={200: {"description": already, "model": StoredObject}, **error_responses(*codes)},
        openapi_extra={"requestBody": {"required": True, "content": BINARY}},
    )


@_upload_route(
    "/{dataset}/blocks/{block_hash}",
    "writeBlock",
    "Upload a block (the server checks its hash and form); 201 when stored, 200 when it already was",
    201,
    "the block was already stored",
    ErrorCode.INVALID_DATASET_NAME,
    ErrorCode.INVALID_HASH,
    ErrorCode.HASH_MISMATCH,
    ErrorCode.INVALID_BLOCKS,
    ErrorCode.MESSAGE_TOO_LARGE,
)
async def write_block(dataset: DatasetParam, block_hash: HashParam, request: Request, state: State) -> Any:
    repo = dataset_of(state, dataset)
    wanted = Multihash.parse(block_hash)
    data = await _read_limited(request, MAX_BLOCK_BYTES)
    if not wanted.matches(data):
        raise ProtocolError(
            ErrorCode.HASH_MISMATCH, f"body does not hash to {wanted}", ObjectDetails(object=str(wanted))
        )
    try:
        decode_block(data)
    except ModelError as exc:
        raise invalid_block(wanted, str(exc)) from None
    created = await asyncio.to_thread(_store_block, repo, wanted, data)
    stored = StoredObject(hash=str(wanted), size=len(data), created=created, visible=True)
    return JSONResponse(stored.model_dump(), 201 if created else 200)


async def _receive_object(request: Request, temp: Path, wanted: Multihash, limit: int) -> FileDigest:
    digester = Digester(wanted.code)
    with open(temp, "wb") as out:
        async for chunk in request.stream():
            if digester.size + len(chunk) > limit:
                raise ProtocolError(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    f"objects are limited to {limit} bytes",
                    MessageTooLargeDetails(limit=limit),
                )
            digester.update(chunk)
            out.write(chunk)
    digest = digester.result()
    if digest.multihash != wanted:
        raise ProtocolError(
            ErrorCode.HASH_MISMATCH, f"body does not hash to {wanted}", ObjectDetails(object=str(wanted))
        )
    return digest


def _already_held(repo: DatasetRepository, kind: ObjectKind, wanted: Multihash, declared: str | None) -> bool:
    """Whether the store holds this object, verified when it arrived (committed, or staged by a PUT
    whose body this server hashed), with the declared size: content addressing makes it the same
    bytes, so the body need not be read (a client sending ``Expect: 100-continue`` never sends it)."""
    if declared is None or not declared.isdigit():
        return False
    ref = ObjectRef(kind, wanted, int(declared))
    if not repo.has_object(ref) and repo.staged_md5(kind, wanted) is None:
        return False
    return stored_as_promised(repo.store.head(repo.object_key(ref)), ref.size)


def _stage_object(repo: DatasetRepository, ref: ObjectRef, temp: Path, md5_hex: str) -> tuple[bool, bool]:
    """Store the verified body unless the same bytes are there; (created, visible). The commit checks
    the object against the ETag the store gave it here (its MD5, or a multipart ETag when the store
    took a large file in parts)."""
    key = repo.object_key(ref)
    created = not stored_as_promised(repo.store.head(key), ref.size, md5_hex)
    etag = repo.store.put_file(key, temp).etag if created else md5_hex
    repo.record_staged(ref, etag)
    return created, repo.has_object(ref)


@_upload_route(
    "/{dataset}/{kind}/{object_hash}",
    "writeObject",
    "Upload an object through the server (the server checks its hash); it is staged until a "
    "committed block references it: 202 when stored, 200 when the same bytes already were",
    202,
    "the same bytes were already stored",
    ErrorCode.INVALID_DATASET_NAME,
    ErrorCode.INVALID_HASH,
    ErrorCode.NO_SUCH_ROUTE,
    ErrorCode.HASH_MISMATCH,
    ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.STORAGE_UNAVAILABLE,
)
async def write_object(
    dataset: DatasetParam, kind: KindParam, object_hash: HashParam, request: Request, state: State
) -> Any:
    repo = dataset_of(state, dataset)
    object_type, wanted = object_kind(kind), Multihash.parse(object_hash)
    declared = request.headers.get("content-length")
    if await asyncio.to_thread(_already_held, repo, object_type, wanted, declared):
        held = ObjectRef(object_type, wanted, int(declared or 0))
        stored = StoredObject(hash=str(wanted), size=held.size, created=False, visible=repo.has_object(held))
        return JSONResponse(stored.model_dump(), 200)
    temp = state.temp_path()
    try:
        digest = await _receive_object(request, temp, wanted, state.settings.max_object_bytes)
        ref = ObjectRef(object_type, wanted, digest.size)
        created, visible = await asyncio.to_thread(_stage_object, repo, ref, temp, digest.md5_hex)
    finally:
        temp.unlink(missing_ok=True)
    state.count_object_bytes(digest.size)
    stored = StoredObject(hash=str(wanted), size=digest.size, created=created, visible=visible)
    return JSONResponse(stored.model_dump(), 202 if created else 200)
