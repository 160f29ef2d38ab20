"""The server application: one FastAPI app over one Repository."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Annotated, Any

from fastapi import FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from pydantic.json_schema import models_json_schema
from starlette.exceptions import HTTPException
from starlette.routing import Match

import smart_transfer
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import DETAILS, NoDetails, details_schemas
from smart_transfer.protocol.rest import ServerInfo
from smart_transfer.repo import Repository
from smart_transfer.server import rest_read, rest_write
from smart_transfer.server.access import AccessLog
from smart_transfer.server.delta_sharing import mount_sharing
from smart_transfer.server.errors import (
    TYPED_ERRORS,
    drop_validation_answers,
    http_error_handler,
    typed_error_handler,
    validation_error_handler,
)
from smart_transfer.server.guard import Asking, admitted
from smart_transfer.server.listing import DATASETS_PER_PAGE, MAX_DATASETS_PER_PAGE, check_page_size, readable_datasets
from smart_transfer.server.ops_routes import ops_router
from smart_transfer.server.rest_common import ErrorBody, client_of, error_responses, operation_of
from smart_transfer.server.settings import ServerSettings
from smart_transfer.server.smart_routes import smart_router
from smart_transfer.server.state import ServerState
from smart_transfer.server.store_routes import store_router
from smart_transfer.server.ui import UI_PREFIX, docs_router, ui_router, wants_html
from smart_transfer.server.workers import WORKERS_STOP_SECONDS

log = logging.getLogger("smart_transfer.server")


def create_app(settings: ServerSettings, port: int) -> FastAPI:
    """Build the app for a server reachable on ``port`` (used to form presigned URLs)."""
    embedded = settings.embedded_store(port)
    store = embedded if embedded is not None else settings.open_store(port)
    repository = Repository(store, settings.index_path(store))
    state = ServerState(settings, repository, settings.base_url(port))

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        asyncio.get_running_loop().set_default_executor(state.workers)  # every asyncio.to_thread runs there
        watching = asyncio.create_task(state.delay.watch())
        watching.add_done_callback(state.delay.stopped)
        try:
            yield
        finally:
            watching.cancel()
            with suppress(asyncio.CancelledError):
                await watching
        # the index closes only once no worker thread can still be using it
        running = state.workers.stop(WORKERS_STOP_SECONDS)
        if running:
            log.warning(
                "%d worker thread(s) still in a store call after %g s; the index stays open until they end",
                running,
                WORKERS_STOP_SECONDS,
            )
        else:
            repository.close()

    app = FastAPI(
        title="smart-transfer",
        version=smart_transfer.__version__,
        summary="Dataset repositories served over the Smart Transfer Protocol and simple REST.",
        description="A pull reads the whole metadata chain (every block, every checkpoint manifest) and then "
        "only the objects it chooses: a partial pull (the latest checkpoint's files, the data slices of a "
        "range, or none) is decided by the client alone, with the same routes and nothing added to them.",
        lifespan=lifespan,
        docs_url=None,  # FastAPI's pages load from a CDN: /docs is served by docs_router, from a packaged copy
        redoc_url=None,
    )
    app.state.smart_transfer = state
    app.add_middleware(AccessLog, metrics=state.metrics)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_exception_handler(HTTPException, http_error_handler(lambda path: _allowed_methods(app, path)))
    for error_type in (*TYPED_ERRORS, Exception):  # each by its class (see TYPED_ERRORS)
        app.add_exception_handler(error_type, typed_error_handler)
    if embedded is not None:
        app.include_router(store_router(embedded, settings.max_object_bytes, state.count_object_bytes))
    app.include_router(smart_router(state))
    app.include_router(ops_router(state))  # before GET /{dataset}: these names are reserved
    app.include_router(ui_router(state))  # the web view: /ui is reserved too
    app.include_router(docs_router())  # /docs and /favicon.ico
    mount_sharing(app, state)  # before the dataset routes: /delta-sharing/... is reserved

    _describe_route(app, state)
    app.include_router(rest_read.router)
    app.include_router(rest_write.router)
    _document_errors(app)
    return app


HTTP_METHODS = ("GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS")


def _describe_route(app: FastAPI, state: ServerState) -> None:
    """``GET /``: the server and a page of the datasets the token may read (a browser is sent to the web
    view)."""
    repository, store = state.repository, state.repository.store

    @app.get(
        "/",
        operation_id="describeServer",
        summary="Describe the server and a page of the datasets the token may read",
        description="Datasets come a page at a time, in the store's order of names; pass `next_page_token` "
        "as `page_token` for the next page (it is null on the last; a page may hold fewer than `limit`, even "
        "none, when the token may read few of many datasets). A browser (an Accept header preferring "
        "text/html to application/json) is sent to the web view at /ui instead; every other client gets "
        "this JSON.",
        response_model=ServerInfo,
        responses={
            303: {"description": "a browser: see the web view at Location (/ui)"},
            **error_responses(ErrorCode.INVALID_REQUEST),
        },
    )
    async def describe_server(
        request: Request,
        authorization: Annotated[str | None, Header()] = None,
        limit: Annotated[
            int | None,
            Query(description=f"datasets per page, 1..{MAX_DATASETS_PER_PAGE} (default {DATASETS_PER_PAGE})"),
        ] = None,
        page_token: Annotated[
            str | None, Query(max_length=512, description="the next_page_token of the page before")
        ] = None,
        describe: Annotated[
            bool, Query(description="also describe each dataset of the page, as GET /{dataset} does (`described`)")
        ] = False,
    ) -> ServerInfo | Response:
        if wants_html(request.headers.get("accept")):
            return RedirectResponse(UI_PREFIX, status_code=303, headers={"Vary": "Accept"})
        asking = Asking(authorization, client_of(request), operation=operation_of(request))
        async with admitted(state, asking) as admission:  # any known token
            size = check_page_size(limit)
            listed = await asyncio.to_thread(readable_datasets, repository, admission.grant, page_token, size)
            described = await asyncio.to_thread(rest_read.describe_many, repository, listed.names) if describe else None
        return ServerInfo(
            server="smart-transfer",
            version=smart_transfer.__version__,
            store="embedded" if store.served_by_owner else "s3",
            datasets=listed.names,
            next_page_token=listed.next_token,
            described=described,
            object_bytes_through_server=state.object_bytes_through_server,
        )


def _allowed_methods(app: FastAPI, path: str) -> list[str]:
    """Every method some route answers at ``path`` (for a truthful ``Allow``), asked of the router."""
    allowed = []
    for method in HTTP_METHODS:
        scope = {"type": "http", "path": path, "method": method, "root_path": "", "app": app}
        if any(route.matches(scope)[0] is Match.FULL for route in app.router.routes):
            allowed.append(method)
    return allowed


def _document_errors(app: FastAPI) -> None:
    """The document lists the real error answers: no FastAPI 422s (this app answers 400), the error
    body and every code's typed details as schemas, and which details each code carries."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            schemas = drop_validation_answers(schema)
            _, defs = models_json_schema([(ErrorBody, "validation")], ref_template="#/components/schemas/{model}")
            schemas.update(defs["$defs"])
            schemas.update(details_schemas())
            schema["x-error-details"] = {
                code.value: f"#/components/schemas/{DETAILS.get(code, NoDetails).__name__}" for code in ErrorCode
            }
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
