"""What a browser may load without a token: the API page (``/docs``: Swagger UI over both OpenAPI
documents) and the favicon. Swagger UI is the packaged copy of the ``swagger-ui-bundle-v2`` wheel
(Apache-2.0), served from this server with the web view's Content-Security-Policy (its inline images moved to files:
see swagger.py), so the page asks no other site for anything, runs no inline script, and works offline;
its only script of our own is ``static/docs.js``."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from smart_transfer.server.ui.render import SECURITY_HEADERS, STATIC_DIR, page, static_file
from smart_transfer.server.ui.swagger import DOCS_STATIC, swagger_assets

#: Where the API page is.
DOCS_PATH = "/docs"
#: The page's own file under DOCS_STATIC (every other one is Swagger UI's: see swagger.py).
OWN_FILES = {"docs.js": (STATIC_DIR / "docs.js", "text/javascript")}
FAVICON = {"favicon.ico": (STATIC_DIR / "favicon.ico", "image/x-icon")}


def docs_router() -> APIRouter:
    """``/docs``, its static files and ``/favicon.ico`` (none takes a token or a request slot)."""
    router = APIRouter(include_in_schema=False)

    @router.get(DOCS_PATH)
    async def docs(request: Request) -> Response:
        return page(request, "docs.html")

    @router.get(DOCS_STATIC + "/{file}")
    async def docs_static(file: str) -> Response:
        asset = swagger_assets().get(file)
        if asset is None:
            return static_file(OWN_FILES, file)
        content, media_type = asset
        return Response(content, media_type=media_type, headers=SECURITY_HEADERS)

    @router.get("/favicon.ico")
    async def favicon() -> Response:
        return static_file(FAVICON, "favicon.ico")

    return router
