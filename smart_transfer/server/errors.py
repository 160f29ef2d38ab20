"""How the server turns typed errors into HTTP answers: ``{"error": {"code", "message"}}``."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse

from smart_transfer.model import ModelError
from smart_transfer.repo import DatasetNotFound, RepositoryError
from smart_transfer.storage import ObjectNotFound, StorageError, StorageUnavailable


def error_body(code: str, message: str) -> dict[str, dict[str, str]]:
    return {"error": {"code": code, "message": message}}


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(code, message), status_code=status, headers=headers)


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
