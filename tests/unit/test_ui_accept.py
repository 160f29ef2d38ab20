"""Which requests for ``/`` are sent to the web view: the Accept rule."""

from __future__ import annotations

import pytest

from smart_transfer.server.ui import wants_html

CHROME = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
FIREFOX = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.parametrize(
    ("accept", "browser"),
    [
        (CHROME, True),
        (FIREFOX, True),
        ("text/html", True),
        ("TEXT/HTML; q=0.5, application/json; q=0.4", True),
        (None, False),
        ("", False),
        ("*/*", False),
        ("application/json", False),
        ("application/json, text/html", False),  # a tie keeps the JSON
        ("text/html;q=0.2, application/json", False),
        ("text/html;q=abc", False),  # an unreadable quality counts 0
        ("text/plain", False),
    ],
)
def test_browsers_are_told_apart_by_accept(accept: str | None, browser: bool) -> None:
    assert wants_html(accept) is browser
