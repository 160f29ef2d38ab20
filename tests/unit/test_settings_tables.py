"""The README's settings tables are the declarations (`make specs` regenerates them)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from settings_tables import README, TABLES, rendered


def test_the_readme_tables_are_the_declared_settings() -> None:
    text = README.read_text()
    assert rendered(text) == text, "README.md's settings tables differ from the declarations: run `make specs`"
    for name in TABLES:
        assert f"<!-- settings:{name} " in text


def test_every_declared_serve_flag_is_in_the_readme() -> None:
    from smart_transfer.config import declarations
    from smart_transfer.server.settings import ServerSettings

    text = README.read_text()
    assert all(f"| `{declared.flag}` |" in text for _, _, declared in declarations(ServerSettings))
