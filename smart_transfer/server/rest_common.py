"""What every simple-protocol route shares: path parameters, the server's one guard (server/guard.py) and
the server state as dependencies, and the documented error answers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from pydantic import BaseModel

from smart_transfer.model import ObjectKind
from smart_transfer.model.multihash import HASH_PATTERN
from smart_transfer.model.names import DATASET_NAME_PATTERN, MAX_NAME_LENGTH
from smart_transfer.protocol.codes import HTTP_STATUS, ErrorCode
from smart_transfer.protocol.errors import details_model
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.server.auth import Access
from smart_transfer.server.guard import Asking, admitted
from smart_transfer.server.state import ServerState

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
BINARY = {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}


class ErrorDetail(BaseModel):
    code: ErrorCode
    message: str
    details: dict[str, Any]


class ErrorBody(BaseModel):
    """Every error answer: ``{"error": {"code", "message", "details"}}``; ``details`` is typed per code
    (see the ``*Details`` schemas and ``x-error-details``)."""

    error: ErrorDetail


def server_state(request: Request) -> ServerState:
    """The state of the server the request reached."""
    state: ServerState = request.app.state.smart_transfer
    return state


State = Annotated[ServerState, Depends(server_state)]


async def guard(request: Request) -> AsyncIterator[None]:
    """Every route passes the server's one guard (server/guard.py): not draining, a token granting read
    (GET/HEAD) or write (PUT) on the dataset, one request slot while it runs."""
    access = Access.READ if request.method in ("GET", "HEAD") else Access.WRITE
    dataset = request.path_params.get("dataset", "")
    asking = Asking(request.headers.get("authorization"), client_of(request), dataset, access, operation_of(request))
    async with admitted(server_state(request), asking):
        yield


def client_of(request: Request) -> str | None:
    """The address of the client of ``request`` (None when the server does not know it)."""
    return request.client.host if request.client else None


def operation_of(request: Request) -> str | None:
    """The kind of ``request`` whose duration the request limit's pace learns: its method and route
    (``GET /{dataset}/blocks/{block_hash}``), not its path (one kind per route, not per dataset). None for
    an object's bytes read or written through the server: the slot is held while the body streams, so
    the duration is the object's size and the client's bandwidth, not the server's pace."""
    if "object_hash" in request.path_params:
        return None
    route = request.scope.get("route")
    return f"{request.method} {getattr(route, 'path', '?')}"


def dataset_of(state: ServerState, name: str) -> DatasetRepository:
    return state.repository.dataset(name)


def object_kind(kind: str) -> ObjectKind:
    return ObjectKind(kind)  # the path pattern admits only the kinds


def error_responses(*codes: ErrorCode) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for routes that may answer ``codes`` (and the guard's 401/403/429)."""
    by_status: dict[int, list[ErrorCode]] = {}
    for code in (*codes, ErrorCode.UNAUTHORIZED, ErrorCode.FORBIDDEN, ErrorCode.BUSY, ErrorCode.SHUTTING_DOWN):
        by_status.setdefault(HTTP_STATUS[code], []).append(code)
    return {
        status: {
            "description": " or ".join(f"{c.value} (details: {details_model(c).__name__})" for c in listed),
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
        }
        for status, listed in sorted(by_status.items())
    }


def get_and_head(router: APIRouter, path: str, operation: str, **options: Any) -> Callable[[Any], Any]:
    """Register one handler for GET and HEAD, each with its own operation id."""

    def register(handler: Any) -> Any:
        router.head(path, operation_id=f"{operation}Head", **options)(handler)
        return router.get(path, operation_id=operation, **options)(handler)

    return register
