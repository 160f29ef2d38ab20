"""The API page's Swagger UI files load under the web view's Content-Security-Policy: no image is left
inline as a ``data:`` URL (``img-src 'self'`` refuses those), and every image moved out is served."""

from __future__ import annotations

import re

from smart_transfer.server.ui.swagger import DOCS_STATIC, SWAGGER_FILES, swagger_assets


def test_swagger_ui_holds_no_inline_image_and_serves_each_one_it_names() -> None:
    assets = swagger_assets()
    named: set[str] = set()
    for name in SWAGGER_FILES:
        content = assets[name][0]
        assert b"data:image" not in content, name
        named |= {match.decode() for match in re.findall(rb"/docs/static/(image-[0-9a-f]{16}\.\w+)", content)}
    images = {name for name in assets if name.startswith("image-")}
    assert named == images and len(images) >= 8  # Swagger UI 5's stylesheet inlines at least 8
    for name in images:
        data, media = assets[name]
        assert media.startswith("image/") and data
        assert (b"<svg" in data) == (media == "image/svg+xml"), name
    assert DOCS_STATIC == "/docs/static"
