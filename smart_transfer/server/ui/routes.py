"""The web view's routes under ``/ui`` (left out of the OpenAPI document: they answer HTML for people).
Every page passes the server's one guard like a REST read (server/guard.py: on a server with tokens a
signed-in token, granting read on the dataset a page shows; a request slot; not while draining) and
answers a refusal, a bad request or a failure with a page that says so and the status REST answers for it
(401 is the sign-in form), never a traceback."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response, StreamingResponse

from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import BusyDetails
from smart_transfer.repo.compare import VersionComparison
from smart_transfer.server.auth import Access, AuthError
from smart_transfer.server.errors import as_protocol_error
from smart_transfer.server.guard import Asking, admitted
from smart_transfer.server.rest_common import client_of, operation_of
from smart_transfer.server.state import ServerState
from smart_transfer.server.ui.downloads import CSV_MEDIA_TYPE, CsvDownload, block_csv, last_count, last_csv, slice_url
from smart_transfer.server.ui.pages import (
    BLOCKS_PER_PAGE,
    DATASETS_PER_PAGE,
    PageError,
    count_preview,
    dataset_page,
    datasets_page,
    page_number,
    per_page,
    sort_of,
)
from smart_transfer.server.ui.render import SECURITY_HEADERS, STATIC_DIR, error_page, page, static_file
from smart_transfer.server.ui.status import server_values
from smart_transfer.server.ui.versions import (
    COMPARISONS_REMEMBERED,
    ROWS_PER_PAGE,
    block_page,
    compare_page,
)
from smart_transfer.server.ui.views import PerHead, Remembered
from smart_transfer.server.ui.visitor import (
    MAX_TOKEN_CHARS,
    Visitor,
    authorization_of,
    check_token,
    forget_token,
    keep_token,
    same_origin,
    visitor_of,
)
from smart_transfer.server.workers import iterate_on_workers

#: Where the web view is.
UI_PREFIX = "/ui"
#: The only files under /ui/static.
STATIC_FILES = {
    "ui.css": (STATIC_DIR / "ui.css", "text/css"),
    "ui.js": (STATIC_DIR / "ui.js", "text/javascript"),
    "data.css": (STATIC_DIR / "data.css", "text/css"),
}
#: Largest sign-in form body read.
MAX_FORM_BYTES = 4 * MAX_TOKEN_CHARS


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


def _refusal(request: Request, exc: Exception, visitor: Visitor) -> Response:
    """The page for a failure: the guard's 401 is the sign-in form (with the status REST answers); every
    other failure an error page whose status is the one REST answers for it (the one map: an exception
    to its ErrorCode, the code to its HTTP status); a page's own bad query parameter says so."""
    if isinstance(exc, PageError):
        return error_page(request, exc.status, str(exc), visitor=visitor)
    error = as_protocol_error(exc)  # logs what nobody foresaw
    if error.code is ErrorCode.UNAUTHORIZED:
        problem = "sign in with a token to see this page"  # a dead cookie's notice is the page header's
        return page(request, "signin.html", error.status, visitor=visitor, problem=problem)
    message = error.message
    if isinstance(error.details, BusyDetails):
        message = f"{message}; try again in {error.details.retry_after} s"
        busy = error_page(request, error.status, message, visitor=visitor)
        busy.headers["Retry-After"] = str(error.details.retry_after)  # as every other face's 429 says it
        return busy
    if error.code is ErrorCode.INTERNAL:
        message = "the server failed to build this page; its log says why"
    return error_page(request, error.status, message, visitor=visitor)


async def _answer(
    state: ServerState, request: Request, build: Callable[[Visitor], Awaitable[Response]], dataset: str | None = None
) -> Response:
    """Run ``build`` behind the server's one guard (a signed-in token, on a server with tokens, granting
    read on ``dataset`` when the page shows one; a request slot); failures become pages."""
    asking = Asking(authorization_of(request), client_of(request), dataset, Access.READ, operation_of(request))
    try:
        async with admitted(state, asking) as admission:
            response = await build(Visitor(admission.grant, open_server=state.authorizer.anonymous))
    except Exception as exc:
        visitor = visitor_of(request, state.authorizer)
        response = _refusal(request, exc, visitor)
        if visitor.signed_out_because:
            forget_token(response, request)
    return response


def ui_router(state: ServerState) -> APIRouter:
    """The routes of the web view (pages, downloads, sign-in and sign-out, its static files)."""
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
                (page_number(raw.get("page")), raw.get("page_token") or None),
                per_page(raw.get("per"), DATASETS_PER_PAGE),
            )
            return page(request, "datasets.html", visitor=visitor, q=query, sort=column, order=direction, **values)

        return await _answer(state, request, build)

    @router.get("/datasets/{name}")
    async def dataset(request: Request, name: str) -> Response:
        async def build(visitor: Visitor) -> Response:
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

        return await _answer(state, request, build, name)

    @router.get("/server")
    async def server(request: Request) -> Response:
        async def build(visitor: Visitor) -> Response:
            return page(request, "server.html", visitor=visitor, **await server_values(state))

        return await _answer(state, request, build)

    _version_routes(router, state)
    _download_routes(router, state)
    _sign_in_routes(router, state)
    _static_routes(router, state)
    return router


def _version_routes(router: APIRouter, state: ServerState) -> None:
    """A block's page and the comparison of two blocks of a dataset."""
    comparisons: PerHead[VersionComparison] = PerHead(COMPARISONS_REMEMBERED)

    @router.get("/datasets/{name}/blocks/{ref}")
    async def block(request: Request, name: str, ref: str) -> Response:
        async def build(visitor: Visitor) -> Response:
            raw = request.query_params
            number, per = page_number(raw.get("page")), per_page(raw.get("per"), ROWS_PER_PAGE)
            values = await asyncio.to_thread(
                lambda: block_page(
                    state.repository.dataset(name), ref, number, per, lambda count: count_preview(state, count)
                )
            )
            return page(request, "block.html", visitor=visitor, **values)

        return await _answer(state, request, build, name)

    @router.get("/datasets/{name}/compare")
    async def compare(request: Request, name: str) -> Response:
        async def build(visitor: Visitor) -> Response:
            raw = request.query_params
            base, target = raw.get("from"), raw.get("to")
            values = await asyncio.to_thread(
                lambda: compare_page(state.repository.dataset(name), comparisons, base, target)
            )
            return page(request, "compare.html", visitor=visitor, **values)

        return await _answer(state, request, build, name)


def _download_routes(router: APIRouter, state: ServerState) -> None:
    """A data slice as Parquet (a redirect to a presigned URL: the bytes skip the server) and records as
    CSV (streamed from the store a row group at a time). Links carry no token: the sign-in cookie does."""

    @router.get("/datasets/{name}/slices/{slice_hash}/parquet")
    async def slice_parquet(request: Request, name: str, slice_hash: str) -> Response:
        async def build(visitor: Visitor) -> Response:
            repo, ttl = state.repository.dataset(name), state.settings.url_ttl_seconds
            url = await asyncio.to_thread(slice_url, state.signer, repo, slice_hash, ttl)
            return RedirectResponse(url, status_code=307, headers=SECURITY_HEADERS)

        return await _answer(state, request, build, name)

    @router.get("/datasets/{name}/blocks/{ref}/csv")
    async def block_rows_csv(request: Request, name: str, ref: str) -> Response:
        async def build(visitor: Visitor) -> Response:
            download = await asyncio.to_thread(block_csv, state.repository.dataset(name), ref)
            return _csv_response(state, download)

        return await _answer(state, request, build, name)

    @router.get("/datasets/{name}/csv")
    async def last_rows_csv(request: Request, name: str) -> Response:
        async def build(visitor: Visitor) -> Response:
            count = last_count(request.query_params.get("last"))
            download = await asyncio.to_thread(last_csv, state.repository.dataset(name), count)
            return _csv_response(state, download)

        return await _answer(state, request, build, name)


def _csv_response(state: ServerState, download: CsvDownload) -> Response:
    """The CSV streamed (its store reads counted like a page's), saved by the browser under its name."""
    headers = {**SECURITY_HEADERS, "Content-Disposition": f'attachment; filename="{download.filename}"'}
    chunks = download.chunks(lambda count: count_preview(state, count))
    return StreamingResponse(iterate_on_workers(chunks), media_type=CSV_MEDIA_TYPE, headers=headers)


def _static_routes(router: APIRouter, state: ServerState) -> None:
    """The view's static files, and a page for every other path under it."""

    @router.get("/static/{file}")
    async def static(file: str) -> Response:
        return static_file(STATIC_FILES, file)

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
            grant = check_token(state.authorizer, token.strip())
        except AuthError as exc:
            return page(request, "signin.html", exc.status, visitor=visitor, problem=str(exc))
        response = RedirectResponse(UI_PREFIX, status_code=303, headers=SECURITY_HEADERS)
        keep_token(response, request, token.strip(), grant)
        return response

    @router.post("/signout")
    async def sign_out(request: Request) -> Response:
        if not same_origin(request):
            return error_page(request, 403, "sign-out is accepted only from this server's own page")
        response = RedirectResponse(UI_PREFIX, status_code=303, headers=SECURITY_HEADERS)
        forget_token(response, request)
        return response
