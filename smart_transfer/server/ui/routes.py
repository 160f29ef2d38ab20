"""The web view's routes under ``/ui`` (left out of the OpenAPI document: they answer HTML for people).
Every page takes a request slot like a REST read, is refused while the server drains, and answers a
bad request or a failure with a page that says so and its status, never a traceback."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, RedirectResponse, Response

from smart_transfer.model import ModelError
from smart_transfer.protocol.errors import HTTP_STATUS, ProtocolError
from smart_transfer.repo import RepositoryError
from smart_transfer.repo.errors import DatasetNotFound
from smart_transfer.server.auth import AuthError
from smart_transfer.server.limits import Busy
from smart_transfer.server.state import ServerState, limit_subject
from smart_transfer.server.ui.pages import (
    BLOCKS_PER_PAGE,
    DATASETS_PER_PAGE,
    PageError,
    dataset_page,
    datasets_page,
    page_number,
    per_page,
    sort_of,
)
from smart_transfer.server.ui.render import SECURITY_HEADERS, STATIC_DIR, error_page, page
from smart_transfer.server.ui.status import server_values
from smart_transfer.server.ui.views import Remembered
from smart_transfer.server.ui.visitor import (
    MAX_TOKEN_CHARS,
    Visitor,
    check_token,
    forget_token,
    keep_token,
    same_origin,
    visitor_of,
)
from smart_transfer.storage import StorageError

#: Where the web view is.
UI_PREFIX = "/ui"
#: The only files under /ui/static.
STATIC_FILES = {"ui.css": "text/css", "ui.js": "text/javascript"}
#: Largest sign-in form body read.
MAX_FORM_BYTES = 4 * MAX_TOKEN_CHARS
log = logging.getLogger("smart_transfer.server.ui")


def wants_html(accept: str | None) -> bool:
    """Whether a request for ``/`` comes from a browser: its Accept header names ``text/html`` with a
    higher quality than ``application/json`` (an absent type counts 0; ``*/*`` counts for neither).
    Browsers send ``text/html,...,*/*;q=0.8``; API clients send ``application/json``, ``*/*`` or nothing."""
    qualities = {"text/html": 0.0, "application/json": 0.0}
    for part in (accept or "").split(","):
        media, *params = (piece.strip() for piece in part.split(";"))
        if media.lower() not in qualities:
            continue
        quality = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        qualities[media.lower()] = max(qualities[media.lower()], quality)
    return qualities["text/html"] > qualities["application/json"]


def _problem(exc: Exception) -> tuple[int, str] | None:
    """The status and sentence of a failure the pages expect (None: an unexpected one)."""
    if isinstance(exc, PageError):
        return exc.status, str(exc)
    if isinstance(exc, DatasetNotFound):
        return 404, f"there is no dataset {exc.name} that you may read"
    if isinstance(exc, ModelError):
        return 404, f"no such dataset: {exc}"
    if isinstance(exc, Busy):
        return 429, f"{exc}; try again in {exc.retry_after} s"
    if isinstance(exc, ProtocolError):
        return HTTP_STATUS[exc.code], str(exc)
    if isinstance(exc, StorageError):
        return 503, f"the store does not answer: {exc}"
    if isinstance(exc, AuthError):
        return exc.status, str(exc)
    if isinstance(exc, RepositoryError):
        return 500, f"the repository cannot be read: {exc}"
    return None


async def _answer(state: ServerState, request: Request, build: Callable[[Visitor], Awaitable[Response]]) -> Response:
    """Run ``build`` for the request's visitor holding a request slot; failures become error pages."""
    visitor = visitor_of(request, state.authorizer)
    try:
        state.refuse_if_draining()
        with state.requests.hold(limit_subject(visitor.grant, request.client.host if request.client else None)):
            response = await build(visitor)
    except Exception as exc:
        problem = _problem(exc)
        if problem is None:
            log.exception("web view: %s failed", request.url.path)
            problem = (500, "the server failed to build this page; its log says why")
        response = error_page(request, *problem, visitor=visitor)
    if visitor.signed_out_because:
        forget_token(response, request)
    return response


def ui_router(state: ServerState) -> APIRouter:
    """The routes of the web view (pages, sign-in and sign-out, its two static files)."""
    router = APIRouter(prefix=UI_PREFIX, include_in_schema=False)
    memory = Remembered()

    @router.get("")
    @router.get("/")
    async def datasets(request: Request) -> Response:
        # query parameters are read here, not declared: a malformed one gets a page, not FastAPI's JSON
        async def build(visitor: Visitor) -> Response:
            raw = request.query_params
            query = raw.get("q", "").strip()
            column, direction = sort_of(raw.get("sort"), raw.get("order"))
            values = await asyncio.to_thread(
                datasets_page,
                state,
                memory,
                visitor,
                query,
                (column, direction),
                page_number(raw.get("page")),
                per_page(raw.get("per"), DATASETS_PER_PAGE),
            )
            return page(request, "datasets.html", visitor=visitor, q=query, sort=column, order=direction, **values)

        return await _answer(state, request, build)

    @router.get("/datasets/{name}")
    async def dataset(request: Request, name: str) -> Response:
        async def build(visitor: Visitor) -> Response:
            if not visitor.may_read(name):
                raise PageError(404, f"there is no dataset {name[:100]} that you may read")
            raw = request.query_params
            base = state.settings.public_url or str(request.base_url)
            values = await asyncio.to_thread(
                dataset_page,
                state,
                memory,
                name,
                page_number(raw.get("page")),
                per_page(raw.get("per"), BLOCKS_PER_PAGE),
                base.rstrip("/"),
            )
            return page(request, "dataset.html", visitor=visitor, **values)

        return await _answer(state, request, build)

    @router.get("/server")
    async def server(request: Request) -> Response:
        async def build(visitor: Visitor) -> Response:
            return page(request, "server.html", visitor=visitor, **await server_values(state))

        return await _answer(state, request, build)

    _sign_in_routes(router, state)
    _static_routes(router, state)
    return router


def _static_routes(router: APIRouter, state: ServerState) -> None:
    """The view's two static files, and a page for every other path under it."""

    @router.get("/static/{file}")
    async def static(file: str) -> Response:
        if file not in STATIC_FILES:
            return Response("not found\n", status_code=404, media_type="text/plain")
        return FileResponse(STATIC_DIR / file, media_type=STATIC_FILES[file], headers=SECURITY_HEADERS)

    @router.get("/{rest:path}")
    async def unknown(request: Request, rest: str) -> Response:
        return error_page(request, 404, "there is no such page", visitor=visitor_of(request, state.authorizer))


async def _form_token(request: Request) -> str:
    """The ``token`` field of a small url-encoded form body (anything larger or else reads as no token)."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return ""
    values = parse_qs(body.decode("utf-8", "replace"), max_num_fields=4)
    return values.get("token", [""])[0]


def _sign_in_routes(router: APIRouter, state: ServerState) -> None:
    """GET and POST /ui/signin, POST /ui/signout: same-origin forms only."""

    @router.get("/signin")
    async def sign_in_form(request: Request) -> Response:
        visitor = visitor_of(request, state.authorizer)
        return page(request, "signin.html", visitor=visitor, problem=None)

    @router.post("/signin")
    async def sign_in(request: Request) -> Response:
        visitor = visitor_of(request, state.authorizer)
        if not same_origin(request):
            return error_page(request, 403, "sign-in is accepted only from this server's own page", visitor)
        token = await _form_token(request)
        try:
            check_token(state.authorizer, token.strip())
        except AuthError as exc:
            return page(request, "signin.html", exc.status, visitor=visitor, problem=str(exc))
        response = RedirectResponse(UI_PREFIX, status_code=303, headers=SECURITY_HEADERS)
        keep_token(response, request, token.strip())
        return response

    @router.post("/signout")
    async def sign_out(request: Request) -> Response:
        if not same_origin(request):
            return error_page(request, 403, "sign-out is accepted only from this server's own page")
        response = RedirectResponse(UI_PREFIX, status_code=303, headers=SECURITY_HEADERS)
        forget_token(response, request)
        return response
