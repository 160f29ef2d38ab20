"""How the server turns typed errors into HTTP answers: ``{"error": {"code", "message"}}``."""

from __future__ import annotations

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from smart_transfer.model import ModelError
from smart_transfer.repo import DatasetNotFound, RepositoryError
from smart_transfer.server.auth import AuthError
from smart_transfer.server.limits import Busy
from smart_transfer.storage import ObjectNotFound, StorageError, StorageUnavailable


def error_body(code: str, message: str) -> dict[str, dict[str, str]]:
    return {"error": {"code": code, "message": message}}


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(code, message), status_code=status, headers=headers)


async def validation_error_handler(_request: Request, exc: Exception) -> JSONResponse:
    """Request validation failures answer like every other bad input: 400 with a typed code."""
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    location = tuple(first.get("loc", ()))
    field = str(location[-1]) if location else "request"
    code = "InvalidRequest"
    if location[:1] == ("path",) and field == "dataset":
        code = "InvalidDatasetName"
    elif location[:1] == ("path",) and field.endswith("hash"):
        code = "InvalidHash"
    elif location[:1] == ("path",) and field == "kind":
        return error_response(404, "NotFound", "no such object kind")
    return error_response(400, code, f"{'.'.join(map(str, location))}: {first.get('msg', 'invalid')}")


async def access_error_handler(_request: Request, exc: Exception) -> JSONResponse:
    """401 (with the scheme to use) and 403 for tokens; 429 with Retry-After when busy."""
    if isinstance(exc, Busy):
        return error_response(429, "Busy", str(exc), {"Retry-After": str(exc.retry_after)})
    assert isinstance(exc, AuthError)
    if exc.status == 401:
        return error_response(401, "Unauthorized", str(exc), {"WWW-Authenticate": 'Bearer realm="smart-transfer"'})
    return error_response(403, "Forbidden", str(exc))


async def typed_error_handler(_request: Request, exc: Exception) -> JSONResponse:
    """Map the project's typed errors to status codes; never a traceback to the client."""
    if isinstance(exc, ModelError):
        return error_response(400, "InvalidInput", str(exc))
    if isinstance(exc, DatasetNotFound | ObjectNotFound):
        return error_response(404, "NotFound", str(exc))
    if isinstance(exc, StorageUnavailable):
        return error_response(503, "StorageUnavailable", str(exc))
    if isinstance(exc, StorageError | RepositoryError):
        return error_response(500, "ServerError", str(exc))
    return error_response(500, "InternalError", "internal error")
