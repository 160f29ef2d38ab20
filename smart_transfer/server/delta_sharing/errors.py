"""Delta Sharing's error answer, ``{"errorCode", "message"}`` with the HTTP status: for the errors of
this protocol (SharingError) and for every error the server's other layers raise, translated once from
the server's own vocabulary (``as_protocol_error``). The status is always the server's own; the code is
the protocol's for the statuses its vocabulary names, and the server's own code for any other (a 413 is
``MessageTooLarge``, not a bad parameter); the server's typed details travel beside it (``details``, which
clients that do not know it ignore)."""

from __future__ import annotations

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from msgspec import to_builtins
from starlette.exceptions import HTTPException

from smart_transfer.protocol.codes import ErrorCode, code_of_status
from smart_transfer.protocol.errors import BusyDetails
from smart_transfer.server.errors import as_protocol_error

#: The protocol's error codes by HTTP status (those the reference server uses).
INVALID_PARAMETER_VALUE = "INVALID_PARAMETER_VALUE"
MALFORMED_REQUEST = "MALFORMED_REQUEST"
RESOURCE_DOES_NOT_EXIST = "RESOURCE_DOES_NOT_EXIST"
CODE_BY_STATUS = {
    400: INVALID_PARAMETER_VALUE,
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: RESOURCE_DOES_NOT_EXIST,
    405: "METHOD_NOT_ALLOWED",
    429: "TOO_MANY_REQUESTS",
    500: "INTERNAL_ERROR",
    503: "SERVICE_UNAVAILABLE",
}
INTERNAL_ERROR = "INTERNAL_ERROR"


def code_for(status: int, own: ErrorCode | None = None) -> str:
    """The error code of an answer of ``status``: the protocol's, else the server's own code (``own``, or
    the one its status stands for: ``code_of_status``); a status neither knows is a bad parameter when
    it is the client's (4xx), an internal error otherwise."""
    if status in CODE_BY_STATUS:
        return CODE_BY_STATUS[status]
    code = own or code_of_status(status)
    if code is not ErrorCode.INTERNAL:
        return code.value
    return INVALID_PARAMETER_VALUE if 400 <= status < 500 else INTERNAL_ERROR


class SharingError(Exception):
    """A Delta Sharing request the server refuses: status, the protocol's error code, one line."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        self.status = status
        self.code = code or code_for(status)
        super().__init__(message)


def invalid(message: str) -> SharingError:
    """400 INVALID_PARAMETER_VALUE."""
    return SharingError(400, message)


def not_found(message: str) -> SharingError:
    """404 RESOURCE_DOES_NOT_EXIST."""
    return SharingError(404, message)


def sharing_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None, details: object = None
) -> JSONResponse:
    """The protocol's error body (with the server's typed ``details`` when there are any)."""
    body: dict[str, object] = {"errorCode": code, "message": message}
    if details is not None:
        body["details"] = to_builtins(details)
    return JSONResponse(body, status_code=status, headers=headers)


async def sharing_error_handler(_request: Request, exc: Exception) -> JSONResponse:
    """Every exception a Delta Sharing route raises, in the protocol's shape."""
    if isinstance(exc, SharingError):
        return sharing_response(exc.status, exc.code, str(exc))
    error = as_protocol_error(exc)
    headers = {}
    if isinstance(error.details, BusyDetails):
        headers["Retry-After"] = str(error.details.retry_after)
    if error.code is ErrorCode.UNAUTHORIZED:
        headers["WWW-Authenticate"] = 'Bearer realm="smart-transfer"'
    code = code_for(error.status, error.code)
    return sharing_response(error.status, code, error.message, headers, error.details)


async def sharing_validation_handler(_request: Request, exc: Exception) -> JSONResponse:
    """A parameter or body that does not parse: 400, naming where."""
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(part) for part in first.get("loc", ("request",)))
    code = MALFORMED_REQUEST if first.get("loc", ("",))[0] == "body" else INVALID_PARAMETER_VALUE
    return sharing_response(400, code, f"{where}: {first.get('msg', 'invalid')}")


async def sharing_http_handler(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's own answers under the prefix: no such route (404), a wrong method (405, with the
    path's Allow), or any other refusal in its own words."""
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    code = code_for(status)
    if status == 404:
        return sharing_response(status, code, f"no route {request.url.path}")
    if status == 405:
        return sharing_response(status, code, f"{request.method} is not allowed here", dict(exc.headers or {}))
    return sharing_response(status, code, str(exc.detail))
