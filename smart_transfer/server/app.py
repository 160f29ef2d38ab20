"""The server application: one FastAPI app over one Repository."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import FastAPI, Header
from fastapi.exceptions import RequestValidationError
from starlette.concurrency import run_in_threadpool

import smart_transfer
from smart_transfer.model import ModelError
from smart_transfer.repo import Repository, RepositoryError
from smart_transfer.server.auth import Access, AuthError
from smart_transfer.server.errors import access_error_handler, typed_error_handler, validation_error_handler
from smart_transfer.server.limits import Busy
from smart_transfer.server.rest_routes import rest_router
from smart_transfer.server.settings import ServerSettings
from smart_transfer.server.smart_routes import smart_router
from smart_transfer.server.state import ServerState
from smart_transfer.server.store_routes import store_router
from smart_transfer.storage import StorageError
from smart_transfer.storage.local import LocalStore


def create_app(settings: ServerSettings, port: int) -> FastAPI:
    """Build the app for a server reachable on ``port`` (used to form presigned URLs)."""
    store = settings.open_store(port)
    repository = Repository(store, settings.index_path(store))
    state = ServerState(settings, repository, settings.base_url(port))

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        repository.close()

    app = FastAPI(
        title="smart-transfer",
        version=smart_transfer.__version__,
        summary="Dataset repositories served over the Smart Transfer Protocol and simple REST.",
        lifespan=lifespan,
    )
    app.state.smart_transfer = state
    for error_type in (ModelError, StorageError, RepositoryError):
        app.add_exception_handler(error_type, typed_error_handler)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_exception_handler(AuthError, access_error_handler)
    app.add_exception_handler(Busy, access_error_handler)
    if isinstance(store, LocalStore):
        app.include_router(store_router(store, settings.max_object_bytes, state.count_object_bytes))
    app.include_router(smart_router(state))

    @app.get(
        "/",
        operation_id="describeServer",
        summary="Describe the server and the datasets the token may read",
        responses={status: {"description": text} for status, text in ((401, "token required or unknown"),)},
    )
    async def describe_server(authorization: Annotated[str | None, Header()] = None) -> dict[str, Any]:
        grant = state.authorizer.subject(authorization)
        names = await run_in_threadpool(
            lambda: [str(n) for n in repository.dataset_names() if grant is None or grant.allows(n, Access.READ)]
        )
        return {
            "server": "smart-transfer",
            "version": smart_transfer.__version__,
            "store": store.describe(),
            "datasets": names,
            "object_bytes_through_server": state.object_bytes_through_server,
        }

    app.include_router(rest_router(state))
    _document_only_real_errors(app)
    return app


def _document_only_real_errors(app: FastAPI) -> None:
    """FastAPI documents a 422 for every route with parameters; this app answers 400 instead."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            for operations in schema.get("paths", {}).values():
                for operation in operations.values():
                    operation.get("responses", {}).pop("422", None)
            for name in ("HTTPValidationError", "ValidationError"):
                schema.get("components", {}).get("schemas", {}).pop(name, None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
