"""Swagger UI 5's files, from the packaged copy (the ``swagger-ui-bundle-v2`` wheel, Apache-2.0), made to
load under the web view's Content-Security-Policy: its stylesheet and script carry their images inline as
``data:`` URLs, which ``img-src 'self'`` refuses (a console error each, and a missing arrow or icon), so
each image becomes a file of its own, named by its hash and served next to them. Built once, on first use,
and kept in memory (about 1.5 MB)."""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote

from swagger_ui_bundle import swagger_ui_path

#: Where the files are served (the API page's static path).
DOCS_STATIC = "/docs/static"
#: Swagger UI's files the API page loads.
SWAGGER_FILES = {
    "swagger-ui.css": "text/css",
    "swagger-ui-bundle.js": "text/javascript",
}
_EXTENSIONS = {"image/svg+xml": "svg", "image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif"}
#: ``url("data:image/svg+xml;charset=utf-8,<svg ...>")``: URL-encoded text, quotes escaped for CSS.
_CSS_TEXT = re.compile(r'url\("data:(image/[\w+]+)(?:;charset=utf-8)?,((?:[^"\\]|\\.)*)"\)')
#: ``url(data:image/png;base64,...)`` in CSS, and ``"data:image/svg+xml;base64,..."`` in a script.
_CSS_BASE64 = re.compile(r"url\(data:(image/[\w+]+);base64,([A-Za-z0-9+/=]+)\)")
_JS_BASE64 = re.compile(r'"data:(image/[\w+]+);base64,([A-Za-z0-9+/=]+)"')

Asset = tuple[bytes, str]


def _package_file(name: str) -> str:
    return (Path(str(swagger_ui_path)) / name).read_text(encoding="utf-8")


@functools.cache
def swagger_assets() -> dict[str, Asset]:
    """Every file under DOCS_STATIC that comes from Swagger UI: name -> (bytes, media type)."""
    assets: dict[str, Asset] = {}

    def moved(media: str, data: bytes) -> str:
        name = f"image-{hashlib.sha256(data).hexdigest()[:16]}.{_EXTENSIONS.get(media, 'bin')}"
        assets[name] = (data, media)
        return f"{DOCS_STATIC}/{name}"

    def text(match: re.Match[str]) -> str:
        return f'url("{moved(match[1], unquote(match[2].replace(chr(92), "")).encode())}")'

    def coded(quote: str) -> Callable[[re.Match[str]], str]:
        return lambda match: f"{quote}{moved(match[1], base64.b64decode(match[2]))}{quote}"

    for name, media in SWAGGER_FILES.items():
        content = _package_file(name)
        if name.endswith(".css"):
            content = _CSS_BASE64.sub(lambda m: f"url({coded('')(m)})", _CSS_TEXT.sub(text, content))
        else:
            content = _JS_BASE64.sub(coded('"'), content)
        assets[name] = (content.encode(), media)
    return assets
