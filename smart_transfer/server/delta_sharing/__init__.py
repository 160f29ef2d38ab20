"""The server speaks Delta Sharing (delta-io/delta-sharing ``PROTOCOL.md``) under ``PREFIX``: every
dataset the token may read is a table, its blocks are the table's versions, its data slices the table's
files, answered with presigned URLs of the store so clients read them straight from storage."""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.routing import Mount

import smart_transfer
from smart_transfer.server.delta_sharing.docs import SharingErrorBody
from smart_transfer.server.delta_sharing.errors import (
    SharingError,
    sharing_error_handler,
    sharing_http_handler,
    sharing_validation_handler,
)
from smart_transfer.server.delta_sharing.query import QueryRequest
from smart_transfer.server.delta_sharing.routes import router
from smart_transfer.server.delta_sharing.tables import Tables
from smart_transfer.server.errors import TYPED_ERRORS, drop_validation_answers
from smart_transfer.server.state import ServerState

#: Where the routes are mounted; a profile's endpoint is the server's URL plus this.
PREFIX = "/delta-sharing"


class SharingMount(Mount):
    """The prefix's mount, matching every path below it: Starlette's ``{path:path}`` is ``.*``, which stops
    at a newline (``%0A`` in a name), and such a request would leave this protocol's error shape."""

    def __init__(self, app: FastAPI) -> None:
        super().__init__(PREFIX, app=app)
        self.path_regex = re.compile(self.path_regex.pattern, re.DOTALL)


def mount_sharing(app: FastAPI, state: ServerState) -> None:
    """Serve Delta Sharing under ``PREFIX`` of ``app`` (before routes whose paths would match it)."""
    app.router.routes.append(SharingMount(sharing_app(state)))


def sharing_app(state: ServerState) -> FastAPI:
    """The Delta Sharing face of a server, with its own error shape and its own OpenAPI document."""
    app = FastAPI(
        title="smart-transfer Delta Sharing",
        version=smart_transfer.__version__,
        summary="Datasets as Delta Sharing tables (protocol: delta-io/delta-sharing PROTOCOL.md).",
        servers=[{"url": PREFIX}],
        docs_url=None,  # the server's /docs shows this document too
        redoc_url=None,
    )
    app.state.smart_transfer = state
    app.state.sharing_tables = Tables(state.repository, state.metrics)
    app.add_exception_handler(RequestValidationError, sharing_validation_handler)
    app.add_exception_handler(HTTPException, sharing_http_handler)
    handled: tuple[type[Exception], ...] = (SharingError, *TYPED_ERRORS, Exception)
    for error_type in handled:  # each by its class (see TYPED_ERRORS)
        app.add_exception_handler(error_type, sharing_error_handler)
    app.include_router(router)
    _document(app)
    return app


def _document(app: FastAPI) -> None:
    """The document names the real answers: no FastAPI 422s (these routes answer 400), the error body."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            schemas = drop_validation_answers(schema)
            schemas["SharingErrorBody"] = SharingErrorBody.model_json_schema()
            schemas["QueryRequest"] = QueryRequest.model_json_schema()  # the route reads its body itself
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
