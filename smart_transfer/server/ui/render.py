"""Rendering pages: the Jinja2 templates (autoescaped), the security headers every page carries, and the
page that says what went wrong (never a traceback)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import FileResponse, HTMLResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape

import smart_transfer
from smart_transfer.server.ui.when import ago, utc_text

HERE = Path(__file__).resolve().parent
#: Where the pages' stylesheet and script are (served under /ui/static).
STATIC_DIR = HERE / "static"
#: No inline script or style, nothing from elsewhere, no framing: the pages' own files only.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}

_environment = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def _number(value: int | None) -> str:
    """An integer with thousands separators (blank for None)."""
    return "" if value is None else f"{value:,}"


def _size(value: int | None) -> str:
    """A byte count a person reads: 1.5 MiB."""
    if value is None:
        return ""
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if amount < 1024 or unit == "TiB":
            return f"{value:,} B" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{value} B"


_environment.filters["number"] = _number
_environment.filters["size"] = _size
_environment.filters["ago"] = ago
_environment.filters["utc"] = utc_text


def static_file(files: dict[str, tuple[Path, str]], name: str) -> Response:
    """One of ``files`` (name -> path and media type) with the security headers; 404 for any other name."""
    if name not in files:
        return Response("not found\n", status_code=404, media_type="text/plain")
    path, media_type = files[name]
    return FileResponse(path, media_type=media_type, headers=SECURITY_HEADERS)


def page(request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
    """A rendered page with the security headers."""
    html = _environment.get_template(template).render(
        request_path=request.url.path, version=smart_transfer.__version__, **values
    )
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


def error_page(request: Request, status: int, message: str, visitor: Any = None) -> HTMLResponse:
    """A page saying what went wrong, with its status."""
    titles = {400: "Bad request", 401: "Not signed in", 403: "Forbidden", 404: "Not found", 429: "Busy"}
    return page(
        request,
        "error.html",
        status,
        title=titles.get(status, "Something went wrong"),
        message=message,
        code=status,
        visitor=visitor,
    )
