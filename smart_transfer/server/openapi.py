"""The OpenAPI document of the REST surface, generated from the app itself."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from smart_transfer.server.app import create_app
from smart_transfer.server.settings import ServerSettings


def build_document() -> dict[str, Any]:
    """The app's OpenAPI schema (built on a throwaway embedded store; routes do not depend on it)."""
    with tempfile.TemporaryDirectory() as root:
        app = create_app(ServerSettings(root=Path(root)), port=8080)
        try:
            return app.openapi()
        finally:
            app.state.smart_transfer.repository.close()
