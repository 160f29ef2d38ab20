"""The documentation's settings tables are the declarations (`make specs` regenerates them)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from docs_reference import REFERENCE, settings_page


def test_the_settings_page_is_the_declared_settings() -> None:
    page = REFERENCE / "settings.md"
    assert page.read_text() == settings_page(), "docs/reference/settings.md differs from the code: run `make specs`"


def test_every_declared_serve_flag_and_variable_is_on_the_settings_page() -> None:
    from smart_transfer.config import declarations, environment_name
    from smart_transfer.server.settings import ENV_PREFIX, ServerSettings

    text = (REFERENCE / "settings.md").read_text()
    for _, _, declared in declarations(ServerSettings):
        assert f"| `{declared.flag}` |" in text
        if declared.from_environment:
            assert f"`{environment_name(ENV_PREFIX, declared)}`" in text
