"""The embedded store's HTTP face: presigned GET/HEAD/PUT of LocalStore objects at ``/_store/{key}``.

These routes stand in for S3 when the server runs on its embedded store; the smart-protocol session
never touches object bytes. Each request is checked against its HMAC signature, method, expiry and,
for PUT, the Content-MD5 the URL was signed for. A PUT URL signed for a part of a multipart upload
writes that part (S3's UploadPart); GETs answer ``Range`` requests (206) like S3.
"""

from __future__ import annotations

from collections.abc import Callable
from email.utils import formatdate

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse, Response

from smart_transfer.storage.base import ObjectInfo
from smart_transfer.storage.digest import md5_hex_from_base64
from smart_transfer.storage.errors import MultipartRefused, NoSuchUpload, PresignRefused
from smart_transfer.storage.local import LocalStore
from smart_transfer.storage.local_signer import PRESIGN_ROUTE, Grant
from smart_transfer.storage.local_staging import ObjectWriter
from smart_transfer.storage.parts import MAX_PART_BYTES, MAX_SINGLE_PUT_BYTES

#: Objects up to this size are answered from memory, read on the route's own thread: a file answer
#: takes four more trips to a thread (stat, open, read, close), which cost more than the read itself
#: for the small objects most datasets are full of.
INLINE_READ_BYTES = 1024 * 1024
OCTET_STREAM = "application/octet-stream"


def error_response(status: int, code: str, message: str) -> JSONResponse:
    """These routes stand in for S3, so they answer with S3's error codes (AccessDenied, NoSuchKey...)."""
    return JSONResponse({"error": {"code": code, "message": message, "details": {}}}, status_code=status)


def _refused(exc: PresignRefused) -> JSONResponse:
    code = {400: "BadDigest", 413: "EntityTooLarge"}.get(exc.status, "AccessDenied")
    return error_response(exc.status, code, exc.reason)


def _md5_problem(bound_md5: str | None, sent: str | None) -> JSONResponse | None:
    """S3's answer when the Content-MD5 header breaks what the URL was signed for, else None."""
    if bound_md5 is None:
        return None
    if sent is None:
        return error_response(403, "AccessDenied", "this URL requires a Content-MD5 header")
    try:
        sent_hex = md5_hex_from_base64(sent)
    except ValueError:
        return error_response(400, "InvalidDigest", "Content-MD5 is not base64")
    if sent_hex != bound_md5:
        return error_response(403, "AccessDenied", "Content-MD5 differs from the one the URL was signed for")
    return None


def _sent_bytes(request: Request, size: int) -> int:
    """How many bytes a GET answers: the range asked for (``bytes=a-b``, ``a-``, ``-n``), else all."""
    wanted = request.headers.get("range", "")
    if not wanted.startswith("bytes=") or "," in wanted:
        return size
    first, _, last = wanted[6:].partition("-")
    try:
        if not first:
            return min(int(last), size)
        end = min(int(last), size - 1) if last else size - 1
        return max(0, end - int(first) + 1)
    except ValueError:
        return size


def _object_answer(store: LocalStore, key: str, info: ObjectInfo, request: Request) -> Response:
    """A GET's or HEAD's answer: small whole objects from memory, the rest (and ranges) from the file."""
    headers = {"ETag": f'"{info.etag}"', "Accept-Ranges": "bytes"}
    if info.modified:
        headers["Last-Modified"] = formatdate(info.modified, usegmt=True)
    if request.method == "GET" and info.size <= INLINE_READ_BYTES and "range" not in request.headers:
        try:
            inline = store.path_of(key).read_bytes()
        except FileNotFoundError:  # gone since its HEAD (gc)
            return error_response(404, "NoSuchKey", f"object not found: {key}")
        if len(inline) == info.size:  # else it changed since its HEAD: the file answer says what is there
            return Response(inline, headers=headers, media_type=OCTET_STREAM)
    return FileResponse(store.path_of(key), headers=headers, media_type=OCTET_STREAM)


def _writer(store: LocalStore, key: str, grant: Grant, max_object_bytes: int) -> ObjectWriter | JSONResponse:
    """The writer of a presigned PUT: of the object, or of the multipart upload's part it names."""
    if grant.upload_id is None:
        return store.object_writer(key, min(max_object_bytes, MAX_SINGLE_PUT_BYTES))
    try:
        return store.part_writer(key, grant, MAX_PART_BYTES)
    except NoSuchUpload as exc:
        return error_response(404, "NoSuchUpload", str(exc))
    except MultipartRefused as exc:
        return error_response(400, "InvalidArgument", str(exc))


def store_router(store: LocalStore, max_object_bytes: int, count_bytes: Callable[[int], None]) -> APIRouter:
    """Routes serving presigned requests for ``store``. One PUT (of an object or of a part) may carry
    at most 5 GiB, like S3's; ``max_object_bytes`` may lower that for whole objects."""
    router = APIRouter(include_in_schema=False)
    path = PRESIGN_ROUTE + "{key:path}"

    @router.api_route(path, methods=["GET", "HEAD"])
    def read_object(key: str, request: Request) -> Response:
        try:
            store.verify_presigned(request.method, key, request.query_params)
        except PresignRefused as exc:
            return _refused(exc)
        info = store.head(key)
        if info is None:
            return error_response(404, "NoSuchKey", f"object not found: {key}")
        if request.method == "GET":
            count_bytes(_sent_bytes(request, info.size))
        return _object_answer(store, key, info, request)

    @router.put(path)
    async def write_object(key: str, request: Request) -> Response:
        try:
            grant = store.verify_presigned("PUT", key, request.query_params)
        except PresignRefused as exc:
            return _refused(exc)
        problem = _md5_problem(grant.md5_hex, request.headers.get("content-md5"))
        if problem is not None:
            return problem
        writer = _writer(store, key, grant, max_object_bytes)
        if isinstance(writer, JSONResponse):
            return writer
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > writer.max_bytes:
            writer.abort()
            return error_response(413, "EntityTooLarge", f"one PUT may carry at most {writer.max_bytes} bytes")
        try:
            async for chunk in request.stream():
                writer.write(chunk)
            info = writer.commit(grant.md5_hex)
            count_bytes(info.size)
        except PresignRefused as exc:
            return _refused(exc)
        except NoSuchUpload as exc:
            return error_response(404, "NoSuchUpload", str(exc))
        except BaseException:
            writer.abort()
            raise
        return Response(status_code=200, headers={"ETag": f'"{info.etag}"'})

    return router
