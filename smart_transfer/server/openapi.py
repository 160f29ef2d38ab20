"""The OpenAPI documents of the REST surface, generated from the app itself: the server's own routes,
and the Delta Sharing routes mounted under their prefix (a protocol of its own, with its own error body)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from starlette.routing import Mount

from smart_transfer.server.app import create_app
from smart_transfer.server.delta_sharing import PREFIX as SHARING_PREFIX
from smart_transfer.server.settings import ServerSettings


def _generated(pick: Callable[[FastAPI], FastAPI]) -> dict[str, Any]:
    """The schema of ``pick(app)``, on a throwaway embedded store (routes do not depend on it)."""
    with tempfile.TemporaryDirectory() as root:
        app = create_app(ServerSettings(root=Path(root)), port=8080)
        try:
            return pick(app).openapi()
        finally:
            app.state.smart_transfer.repository.close()


def _sharing(app: FastAPI) -> FastAPI:
    mounted = next(r.app for r in app.routes if isinstance(r, Mount) and r.path == SHARING_PREFIX)
    assert isinstance(mounted, FastAPI)
    return mounted


def build_document() -> dict[str, Any]:
    """The app's OpenAPI schema."""
    return _generated(lambda app: app)


def build_sharing_document() -> dict[str, Any]:
    """The Delta Sharing routes' OpenAPI schema (paths relative to the prefix, named in ``servers``)."""
    return _generated(_sharing)
