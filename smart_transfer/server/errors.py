"""How the server reports every failure, once for both faces: an exception becomes a ProtocolError
(the one vocabulary), which a session sends as ``Error`` and REST as ``{"error": {code, message,
details}}`` with the code's HTTP status. Client faults are logged as one line, never a traceback."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from smart_transfer.model import InvalidDatasetName, InvalidMultihash, ModelError
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import (
    BusyDetails,
    MethodNotAllowedDetails,
    ProtocolError,
    RangeNotSatisfiableDetails,
)
from smart_transfer.repo import DatasetNotFound, RepositoryError
from smart_transfer.server.auth import AuthError
from smart_transfer.server.limits import Busy
from smart_transfer.storage import ObjectNotFound, StorageError, StorageUnavailable

log = logging.getLogger("smart_transfer.server")
#: The error classes an app registers its handler for one by one: Starlette re-raises (and logs) whatever
#: reaches the catch-all ``Exception`` handler, after answering, which also drops the connection.
TYPED_ERRORS: tuple[type[Exception], ...] = (ProtocolError, ModelError, StorageError, RepositoryError, AuthError, Busy)


def as_protocol_error(exc: BaseException) -> ProtocolError:
    """The typed error ``exc`` stands for (Internal, logged, for anything unforeseen)."""
    if isinstance(exc, ProtocolError):
        return exc
    simple: list[tuple[type[BaseException], ErrorCode]] = [
        (InvalidDatasetName, ErrorCode.INVALID_DATASET_NAME),
        (InvalidMultihash, ErrorCode.INVALID_HASH),
        (StorageUnavailable, ErrorCode.STORAGE_UNAVAILABLE),
        (ObjectNotFound, ErrorCode.OBJECT_NOT_FOUND),
        (ModelError, ErrorCode.INVALID_REQUEST),
    ]
    for kind, code in simple:
        if isinstance(exc, kind):
            return ProtocolError(code, str(exc))
    if isinstance(exc, DatasetNotFound):
        return ProtocolError(ErrorCode.DATASET_NOT_FOUND, f"dataset {exc.name} does not exist")
    if isinstance(exc, AuthError):
        return ProtocolError(ErrorCode.UNAUTHORIZED if exc.status == 401 else ErrorCode.FORBIDDEN, str(exc))
    if isinstance(exc, Busy):
        return ProtocolError(ErrorCode.BUSY, str(exc), BusyDetails(retry_after=exc.retry_after))
    if isinstance(exc, StorageError | RepositoryError):
        log.warning("server error: %s", exc)
        return ProtocolError(ErrorCode.INTERNAL, str(exc))
    log.error("internal error: %s: %s", type(exc).__name__, exc, exc_info=exc)
    return ProtocolError(ErrorCode.INTERNAL, "internal server error")


def error_response(error: ProtocolError) -> JSONResponse:
    """The REST answer for ``error``, with the headers its status calls for."""
    headers: dict[str, str] = {}
    if isinstance(error.details, BusyDetails):
        headers["Retry-After"] = str(error.details.retry_after)
    if error.code is ErrorCode.UNAUTHORIZED:
        headers["WWW-Authenticate"] = 'Bearer realm="smart-transfer"'
    if isinstance(error.details, RangeNotSatisfiableDetails):
        headers["Content-Range"] = f"bytes */{error.details.size}"
    if isinstance(error.details, MethodNotAllowedDetails):
        headers["Allow"] = ", ".join(error.details.allowed)
    if error.code is ErrorCode.SHUTTING_DOWN:
        headers["Connection"] = "close"  # the next request goes to a new connection: another replica
    body = {"error": {"code": error.code.value, "message": error.message, "details": error.details_dict()}}
    return JSONResponse(body, status_code=error.status, headers=headers)


async def typed_error_handler(_request: Request, exc: Exception) -> JSONResponse:
    """Every exception a route raises answers in the documented error shape."""
    return error_response(as_protocol_error(exc))


async def validation_error_handler(_request: Request, exc: Exception) -> JSONResponse:
    """Request validation failures answer like every other bad input: 400 with a typed code."""
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    location = tuple(first.get("loc", ()))
    field = str(location[-1]) if location else "request"
    code = ErrorCode.INVALID_REQUEST
    if location[:1] == ("path",) and field == "dataset":
        code = ErrorCode.INVALID_DATASET_NAME
    elif location[:1] == ("path",) and field.endswith("hash"):
        code = ErrorCode.INVALID_HASH
    elif location[:1] == ("path",) and field == "kind":
        return error_response(ProtocolError(ErrorCode.NO_SUCH_ROUTE, "no such object kind (data or checkpoints)"))
    return error_response(ProtocolError(code, f"{'.'.join(map(str, location))}: {first.get('msg', 'invalid')}"))


def drop_validation_answers(schema: dict[str, Any]) -> dict[str, Any]:
    """Remove FastAPI's generated 422 answers from an OpenAPI document (these apps answer bad input with
    400); returns the document's component schemas, for the caller's error schemas."""
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            operation.get("responses", {}).pop("422", None)
    schemas: dict[str, Any] = schema.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    return schemas


ErrorHandler = Callable[[Request, Exception], Awaitable[JSONResponse]]


def http_error_handler(allowed_methods: Callable[[str], list[str]]) -> ErrorHandler:
    """Starlette's own 404/405 answers, in the documented shape (405 with the path's real Allow)."""

    async def handler(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 405:
            allowed = allowed_methods(request.url.path)
            return error_response(
                ProtocolError(
                    ErrorCode.METHOD_NOT_ALLOWED,
                    f"{request.method} is not allowed on {request.url.path}",
                    MethodNotAllowedDetails(allowed=allowed),
                )
            )
        if exc.status_code == 404:
            return error_response(ProtocolError(ErrorCode.NO_SUCH_ROUTE, f"no route {request.url.path}"))
        return error_response(ProtocolError(ErrorCode.INVALID_REQUEST, str(exc.detail)))

    return handler
