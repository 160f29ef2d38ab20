"""The Simple Transfer Protocol: plain REST over the same repositories, for clients that cannot hold a
WebSocket session (curl, browsers, restricted networks) and as the smart path's fallback.

Reads: head, blocks and objects (on S3 objects answer with a redirect to a short-lived presigned GET
unless ``?redirect=false``; range requests and strong ETags everywhere). Writes: objects and blocks
whose bodies the server hashes (a mismatch changes nothing), and head by compare-and-swap with
``If-Match`` after checking the new chain is valid and complete.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from pydantic import BaseModel

from smart_transfer.model import (
    ChainTip,
    InvalidDatasetName,
    InvalidMultihash,
    ModelError,
    Multihash,
    decode_block,
    validate_extension,
)
from smart_transfer.model.block import MAX_BLOCK_BYTES
from smart_transfer.model.multihash import new_hasher
from smart_transfer.model.names import DATASET_NAME_PATTERN, MAX_NAME_LENGTH
from smart_transfer.protocol.messages import HASH_PATTERN
from smart_transfer.repo import HeadMoved, ObjectKind
from smart_transfer.repo.dataset import (
    MAX_CHAIN_WALK,
    DatasetRepository,
    NewBlock,
    ObjectRef,
    checkpoint_refs,
    objects_of,
)
from smart_transfer.repo.errors import CorruptRepository
from smart_transfer.repo.layout import block_key
from smart_transfer.server.auth import Access
from smart_transfer.server.errors import error_response
from smart_transfer.server.push_flow import list_objects
from smart_transfer.server.state import ServerState
from smart_transfer.storage.s3 import S3Store

DatasetParam = Annotated[
    str,
    Path(
        description="dataset name: 1-100 ASCII letters and digits joined by single - . _",
        pattern=DATASET_NAME_PATTERN,
        max_length=MAX_NAME_LENGTH,
    ),
]
HashParam = Annotated[str, Path(description="multihash, multibase base16 (f1220 + 64 hex)", pattern=HASH_PATTERN)]
KindParam = Annotated[str, Path(description="object kind", pattern="^(data|checkpoints)$")]
#: Above this many objects to check, the head move lists the store instead of asking per object.
LISTING_THRESHOLD = 20
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")
BINARY = {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    """Every error answer: ``{"error": {"code", "message"}}``."""

    error: ErrorDetail


class ObjectTotals(BaseModel):
    count: int
    bytes: int


class DatasetInfo(BaseModel):
    """A dataset as ``GET /{dataset}`` describes it."""

    name: str
    dataset_id: str
    head: str
    blocks: int
    records: int
    data: ObjectTotals
    checkpoints: ObjectTotals


class StoredObject(BaseModel):
    """What a successful PUT of a block or object stored."""

    hash: str
    size: int
    created: bool


class HeadMovedTo(BaseModel):
    old_head: str | None
    new_head: str


#: The error body, inlined so it is documented as JSON even on routes whose success is text or bytes.
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
        }
    },
}


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    text = {
        400: "malformed name, hash, header, body or chain",
        401: "a bearer token is required, or it is unknown",
        403: "the token does not grant this access to the dataset",
        404: "no such dataset, block or object",
        409: "the new head does not extend the current one",
        412: "head moved (If-Match did not match)",
        413: "body too large",
        416: "range not satisfiable",
        428: "If-Match or If-None-Match required",
        429: "busy: too many concurrent requests; retry after the Retry-After seconds",
        503: "storage unavailable",
    }
    return {
        status: {"description": text[status], "content": {"application/json": {"schema": ERROR_SCHEMA}}}
        for status in (*statuses, 401, 403, 429)
    }


class RestError(Exception):
    """An HTTP error answer with a typed code."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
        super().__init__(message)


def _dataset(state: ServerState, name: str) -> DatasetRepository:
    try:
        return state.repository.dataset(name)
    except InvalidDatasetName as exc:
        raise RestError(400, "InvalidDatasetName", str(exc)) from None


def _hash(text: str) -> Multihash:
    try:
        return Multihash.parse(text)
    except InvalidMultihash as exc:
        raise RestError(400, "InvalidHash", str(exc)) from None


def _tip(dataset: DatasetRepository) -> ChainTip:
    tip = dataset.tip()
    if tip is None:
        raise RestError(404, "DatasetNotFound", f"dataset {dataset.name} does not exist")
    return tip


def _etag_matches(header: str | None, value: str) -> bool:
    if header is None:
        return False
    candidates = {part.strip().removeprefix("W/").strip('"') for part in header.split(",")}
    return "*" in candidates or value in candidates


def _byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The single range asked for (inclusive), None for the whole object; RestError 416 if unsatisfiable."""
    if header is None:
        return None
    match = _RANGE.fullmatch(header.strip())
    if match is None:
        return None  # multi-range or unknown units: answer with the whole object (allowed by RFC 9110)
    first, last = match.groups()
    unsatisfiable = RestError(
        416, "RangeNotSatisfiable", f"object has {size} bytes", {"Content-Range": f"bytes */{size}"}
    )
    if first == "":
        if last == "" or int(last) == 0:
            raise unsatisfiable
        start, end = max(size - int(last), 0), size - 1
    else:
        start, end = int(first), (int(last) if last else size - 1)
    end = min(end, size - 1)
    if start >= size or start > end:
        raise unsatisfiable
    return start, end


def rest_router(state: ServerState) -> APIRouter:
    """The simple-protocol routes over ``state.repository``."""

    async def guard(request: Request) -> AsyncIterator[None]:
        """Every route: the token must grant read (GET/HEAD) or write (PUT) on the dataset, and the
        request takes one of the concurrency slots (global and per subject) while it runs."""
        access = Access.READ if request.method in ("GET", "HEAD") else Access.WRITE
        grant = state.authorizer.check(
            request.headers.get("authorization"), request.path_params.get("dataset", ""), access
        )
        with state.requests.hold(grant.subject if grant is not None else "anonymous"):
            yield

    router = APIRouter(tags=["simple protocol"], dependencies=[Depends(guard)])
    store = state.repository.store
    settings = state.settings

    def get_and_head(path: str, operation: str, **options: Any) -> Callable[[Any], Any]:
        """Register one handler for GET and HEAD, each with its own operation id."""

        def register(handler: Any) -> Any:
            router.head(path, operation_id=f"{operation}Head", **options)(handler)
            return router.get(path, operation_id=operation, **options)(handler)

        return register

    async def run(function: Any, *args: Any) -> Any:
        return await asyncio.to_thread(function, *args)

    def failed(exc: RestError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message, exc.headers)

    @router.get(
        "/{dataset}",
        operation_id="describeDataset",
        summary="Describe a dataset",
        response_model=DatasetInfo,
        responses=_errors(400, 404),
    )
    async def describe_dataset(dataset: DatasetParam) -> Any:
        try:
            repo = _dataset(state, dataset)
            tip: ChainTip = await run(_tip, repo)
        except RestError as exc:
            return failed(exc)
        totals = {kind: [0, 0] for kind in ObjectKind}
        for kind, _, size in await run(lambda: list(repo.index.objects(repo.name))):
            totals[kind][0] += 1
            totals[kind][1] += size
        return DatasetInfo(
            name=repo.name,
            dataset_id=tip.dataset_id,
            head=str(tip.head),
            blocks=tip.sequence_number + 1,
            records=tip.next_offset,
            data=ObjectTotals(count=totals[ObjectKind.DATA][0], bytes=totals[ObjectKind.DATA][1]),
            checkpoints=ObjectTotals(count=totals[ObjectKind.CHECKPOINT][0], bytes=totals[ObjectKind.CHECKPOINT][1]),
        )

    @get_and_head(
        "/{dataset}/refs/head",
        "readHead",
        summary="The dataset's head block hash (text)",
        response_class=PlainTextResponse,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}, **_errors(400, 404)},
    )
    async def read_head(dataset: DatasetParam) -> Response:
        try:
            repo = _dataset(state, dataset)
            head = await run(repo.head)
        except RestError as exc:
            return failed(exc)
        if head is None:
            return error_response(404, "DatasetNotFound", f"dataset {dataset} does not exist")
        return PlainTextResponse(str(head), headers={"ETag": f'"{head}"', "Cache-Control": "no-store"})

    @router.put(
        "/{dataset}/refs/head",
        operation_id="writeHead",
        summary="Move head by compare-and-swap (If-Match: old head, or If-None-Match: * to create)",
        response_model=HeadMovedTo,
        responses=_errors(400, 404, 409, 412, 428),
        openapi_extra={"requestBody": {"required": True, "content": {"text/plain": {"schema": {"type": "string"}}}}},
    )
    async def write_head(
        dataset: DatasetParam,
        request: Request,
        if_match: Annotated[str | None, Header()] = None,
        if_none_match: Annotated[str | None, Header()] = None,
    ) -> Any:
        try:
            repo = _dataset(state, dataset)
            if if_match is None and (if_none_match or "").strip() != "*":
                raise RestError(428, "PreconditionRequired", "send If-Match: <current head> (or If-None-Match: *)")
            expected = _hash(if_match.strip().strip('"')) if if_match is not None else None
            body = (await request.body())[:1024].decode("ascii", "replace").strip()
            new_head = _hash(body)
            new_tip = await run(_move_head, repo, expected, new_head)
        except RestError as exc:
            return failed(exc)
        return HeadMovedTo(old_head=str(expected) if expected else None, new_head=str(new_tip.head))

    def _move_head(repo: DatasetRepository, expected: Multihash | None, new_head: Multihash) -> ChainTip:
        tip = repo.tip()
        actual = tip.head if tip is not None else None
        if actual != expected:
            raise RestError(412, "HeadMoved", f"head is {actual or 'absent'}, not {expected or 'absent'}")
        if new_head == actual:
            assert tip is not None
            return tip
        walked: list[NewBlock] = []
        cursor: Multihash | None = new_head
        while cursor is not None and cursor != actual:
            if len(walked) >= MAX_CHAIN_WALK:
                raise RestError(400, "InvalidChain", "chain too long")
            try:
                data = repo.block_bytes(cursor)
                item = NewBlock(cursor, data, decode_block(data))
            except CorruptRepository:
                raise RestError(400, "MissingBlock", f"block {cursor} is not uploaded; PUT it first") from None
            except ModelError as exc:
                raise RestError(400, "InvalidBlock", f"block {cursor}: {exc}") from None
            walked.append(item)
            cursor = item.block.prev_block_hash
        if cursor != actual:
            raise RestError(409, "Diverged", f"{new_head} does not extend the current head {actual}")
        walked.reverse()
        try:
            validate_extension(tip, ((b.hash, b.block) for b in walked))
        except ModelError as exc:
            raise RestError(400, "InvalidChain", str(exc)) from None
        manifests = {}
        for ref in checkpoint_refs(walked):
            try:
                manifests[ref.physical_hash] = repo.read_manifest(ref)
            except CorruptRepository:
                raise RestError(
                    400, "MissingObjects", f"checkpoint manifest {ref.physical_hash} not uploaded"
                ) from None
        pending = [ref for ref in objects_of(walked, manifests) if not repo.has_object(ref)]
        # one listing instead of one HEAD per object when there are many to check
        listed = list_objects(repo) if len(pending) > LISTING_THRESHOLD else None
        missing = []
        for ref in pending:
            key = repo.object_key(ref)
            info = listed.get(key) if listed is not None else store.head(key)
            if info is None or info.size != ref.size:
                missing.append(f"{ref.kind.value}/{ref.physical_hash}")
        if missing:
            raise RestError(400, "MissingObjects", f"{len(missing)} object(s) not uploaded, first: {missing[0]}")
        try:
            # every walked block was read back from this repository above: it is stored already
            return repo.commit(expected, tip, walked, manifests, blocks_stored=True)
        except HeadMoved as exc:
            raise RestError(412, "HeadMoved", str(exc)) from None

    @get_and_head(
        "/{dataset}/blocks/{block_hash}",
        "readBlock",
        summary="A metadata block's canonical bytes",
        response_class=Response,
        responses={200: {"content": BINARY}, **_errors(400, 404)},
    )
    async def read_block(dataset: DatasetParam, block_hash: HashParam) -> Response:
        try:
            repo = _dataset(state, dataset)
            wanted = _hash(block_hash)
            # content-addressed: cached bytes are valid whatever the head; sync only on a miss
            data = await run(repo.index.block_bytes, repo.name, wanted)
            if data is None:
                await run(_tip, repo)
                data = await run(repo.index.block_bytes, repo.name, wanted) or await run(_stored_block, repo, wanted)
        except RestError as exc:
            return failed(exc)
        return Response(
            data, media_type="application/octet-stream", headers={"ETag": f'"{wanted}"', "Cache-Control": "immutable"}
        )

    def _stored_block(repo: DatasetRepository, wanted: Multihash) -> bytes:
        info = store.head(block_key(repo.name, wanted))
        if info is None:
            raise RestError(404, "NotFound", f"no block {wanted} in {repo.name}")
        data = store.get(block_key(repo.name, wanted))
        if not wanted.matches(data):
            raise RestError(404, "NotFound", f"no valid block {wanted} in {repo.name}")
        return data

    @router.put(
        "/{dataset}/blocks/{block_hash}",
        operation_id="writeBlock",
        summary="Upload a block (the server checks its hash and form)",
        status_code=201,
        response_model=StoredObject,
        responses=_errors(400, 413),
        openapi_extra={"requestBody": {"required": True, "content": BINARY}},
    )
    async def write_block(dataset: DatasetParam, block_hash: HashParam, request: Request) -> Any:
        try:
            repo = _dataset(state, dataset)
            wanted = _hash(block_hash)
            data = await _read_limited(request, MAX_BLOCK_BYTES)
            if not wanted.matches(data):
                raise RestError(400, "HashMismatch", f"body does not hash to {wanted}")
            try:
                decode_block(data)
            except ModelError as exc:
                raise RestError(400, "InvalidBlock", str(exc)) from None
            created = await run(store.create_if_absent, block_key(repo.name, wanted), data)
            await run(repo.index.record_blocks, repo.name, [(wanted, data)])
        except RestError as exc:
            return failed(exc)
        return JSONResponse(StoredObject(hash=str(wanted), size=len(data), created=created).model_dump(), 201)

    async def _read_limited(request: Request, limit: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise RestError(413, "TooLarge", f"body exceeds {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    def _object_ref(repo: DatasetRepository, kind: str, object_hash: str) -> tuple[ObjectKind, Multihash]:
        try:
            object_kind = ObjectKind(kind)
        except ValueError:
            raise RestError(404, "NotFound", f"no such object kind {kind[:40]!r}") from None
        return object_kind, _hash(object_hash)

    @get_and_head(
        "/{dataset}/{kind}/{object_hash}",
        "readObject",
        summary="An object (data slice or checkpoint): redirect to storage, or streamed",
        response_class=Response,
        responses={
            200: {"content": BINARY},
            206: {"content": BINARY, "description": "the requested range"},
            304: {"description": "not modified (If-None-Match matched)"},
            307: {"description": "fetch it from storage at Location (a short-lived presigned URL)"},
            **_errors(400, 404, 416, 503),
        },
    )
    async def read_object(
        dataset: DatasetParam,
        kind: KindParam,
        object_hash: HashParam,
        request: Request,
        redirect: Annotated[
            bool, Query(description="redirect to a presigned storage URL when the store has one")
        ] = True,
        range_header: Annotated[str | None, Header(alias="range")] = None,
        if_none_match: Annotated[str | None, Header()] = None,
    ) -> Response:
        try:
            repo = _dataset(state, dataset)
            object_kind, wanted = _object_ref(repo, kind, object_hash)
            size = await run(repo.index.object_size, repo.name, object_kind, wanted)
            if size is None:  # maybe committed by another server since: sync the head once and look again
                await run(_tip, repo)
                size = await run(repo.index.object_size, repo.name, object_kind, wanted)
            if size is None:
                raise RestError(404, "NotFound", f"no {kind} object {wanted} in {repo.name}")
            key = repo.object_key(ObjectRef(object_kind, wanted, size))
            etag = f'"{wanted}"'
            headers = {"ETag": etag, "Accept-Ranges": "bytes", "Cache-Control": "immutable"}
            if _etag_matches(if_none_match, str(wanted)):
                return Response(status_code=304, headers=headers)
            if redirect and isinstance(store, S3Store):
                signed = await run(store.presign_get, key, settings.url_ttl_seconds)
                return RedirectResponse(signed.url, status_code=307, headers={"Cache-Control": "no-store"})
            span = _byte_range(range_header, size)
        except RestError as exc:
            return failed(exc)
        start, end = span if span is not None else (0, size - 1)
        length = end - start + 1 if size else 0
        headers["Content-Length"] = str(length)
        status = 200
        if span is not None:
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        if request.method == "HEAD" or length == 0:
            return Response(status_code=status, headers=headers, media_type="application/octet-stream")
        chunks: Iterator[bytes] = await run(store.stream, key, start, end)
        state.count_object_bytes(length)
        return StreamingResponse(
            _iterate(chunks), status_code=status, headers=headers, media_type="application/octet-stream"
        )

    async def _iterate(chunks: Iterator[bytes]) -> Any:
        sentinel = object()
        while True:
            chunk = await asyncio.to_thread(next, chunks, sentinel)
            if chunk is sentinel:
                return
            yield chunk

    @router.put(
        "/{dataset}/{kind}/{object_hash}",
        operation_id="writeObject",
        summary="Upload an object through the server (the fallback path; the server checks its hash)",
        status_code=201,
        response_model=StoredObject,
        responses=_errors(400, 404, 413, 503),
        openapi_extra={"requestBody": {"required": True, "content": BINARY}},
    )
    async def write_object(
        dataset: DatasetParam,
        kind: KindParam,
        object_hash: HashParam,
        request: Request,
    ) -> Any:
        temp = None
        try:
            repo = _dataset(state, dataset)
            object_kind, wanted = _object_ref(repo, kind, object_hash)
            hasher = new_hasher(wanted.code)
            md5 = hashlib.md5()
            temp = state.temp_path()
            size = 0
            with open(temp, "wb") as out:
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > settings.max_object_bytes:
                        raise RestError(413, "TooLarge", f"objects are limited to {settings.max_object_bytes} bytes")
                    hasher.update(chunk)
                    md5.update(chunk)
                    out.write(chunk)
            if Multihash(wanted.code, hasher.digest()) != wanted:
                raise RestError(400, "HashMismatch", f"body does not hash to {wanted}")
            key = repo.object_key(ObjectRef(object_kind, wanted, size))
            existing = await run(store.head, key)
            created = existing is None or existing.size != size or existing.etag != md5.hexdigest()
            if created:
                await run(store.put_file, key, temp)
            state.count_object_bytes(size)
        except RestError as exc:
            return failed(exc)
        finally:
            if temp is not None:
                temp.unlink(missing_ok=True)
        return JSONResponse(StoredObject(hash=str(wanted), size=size, created=created).model_dump(), 201)

    return router
