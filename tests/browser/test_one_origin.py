"""Every page a browser loads from the server holds only our code, from our origin: on a server with
tokens, the API page (/docs, Swagger UI from the packaged copy) and every /ui page load with no request to
another origin, no Content-Security-Policy violation and no console error (the favicon answers too)."""

from __future__ import annotations

import urllib.request
from typing import Any
from urllib.parse import urlsplit

from smart_transfer.server.ui.render import CONTENT_SECURITY_POLICY
from tests.browser.conftest import PAGE_LOAD_SECONDS, UiServer, screenshot
from tests.browser.test_ui import _by, _sign_in, _status, _wait

#: The pages a signed-in visitor of the test server sees (its datasets: see conftest's _seed_datasets).
UI_PAGES = ("/ui", "/ui/server", "/ui/datasets/pub-rich", "/ui/datasets/raw-bytes", "/ui/signin")


def _requested(driver: Any) -> list[str]:
    """Every URL the page loaded: the document and each resource (script, style, image, fetch, icon)."""
    names: list[str] = driver.execute_script(
        "return [location.href, ...performance.getEntriesByType('resource').map(e => e.name)]"
    )
    return names


def _console_errors(driver: Any) -> list[str]:
    """The console's SEVERE entries since the last call (a CSP violation and a failed load are SEVERE)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def _only_ours(driver: Any, origin: str, path: str) -> None:
    foreign = [url for url in _requested(driver) if f"{urlsplit(url).scheme}://{urlsplit(url).netloc}" != origin]
    assert foreign == [], f"{path} asked another origin: {foreign}"
    errors = _console_errors(driver)
    assert errors == [], f"{path}: console errors {errors}"


def test_docs_and_every_page_load_only_from_this_origin(ui_server: UiServer, browser: Any) -> None:
    url = ui_server.server.url
    origin = f"{urlsplit(url).scheme}://{urlsplit(url).netloc}"
    for doc, title in (("", "smart-transfer"), ("?doc=sharing", "smart-transfer Delta Sharing")):
        browser.get(f"{url}/docs{doc}")
        # Swagger UI rendered the document's operations: its script ran and read the document
        _wait(browser, lambda d: d.find_elements(_by("CSS_SELECTOR"), ".swagger-ui .opblock-summary"))
        assert browser.find_element(_by("CSS_SELECTOR"), ".swagger-ui .info .title").text.startswith(title)
        browser.find_element(_by("CSS_SELECTOR"), ".swagger-ui .opblock-summary").click()  # details, selects
        _wait(browser, lambda d: d.find_elements(_by("CSS_SELECTOR"), ".swagger-ui .opblock-body"))
        screenshot(browser, f"docs{doc.replace('?doc=', '-')}-{ui_server.backend}")
        _only_ours(browser, origin, f"/docs{doc}")

    _sign_in(browser, url, ui_server.tokens["carol"])
    _console_errors(browser)  # the sign-in's own pages are checked below
    for path in UI_PAGES:
        browser.get(f"{url}{path}")
        _wait(browser, lambda d: d.execute_script("return document.readyState") == "complete")
        _only_ours(browser, origin, path)
        icon = browser.find_element(_by("CSS_SELECTOR"), "link[rel=icon]").get_attribute("href")
        assert icon == f"{url}/favicon.ico", path


def test_the_favicon_and_the_api_page_need_no_token(ui_server: UiServer) -> None:
    url = ui_server.server.url
    status, icon = _status(f"{url}/favicon.ico")
    assert status == 200 and icon[:4] == b"\x00\x00\x01\x00"  # an ICO file
    status, page = _status(f"{url}/docs")
    assert status == 200 and b"<script>" not in page and b"/docs/static/docs.js" in page
    assert _status(f"{url}/docs/static/swagger-ui-bundle.js")[0] == 200
    assert _status(f"{url}/docs/static/nothing.js")[0] == 404
    assert _status(f"{url}/healthz")[0] == 200  # liveness stays open
    docs_policy = urllib.request.urlopen(f"{url}/docs", timeout=PAGE_LOAD_SECONDS).headers["Content-Security-Policy"]
    assert docs_policy == CONTENT_SECURITY_POLICY and "'unsafe-inline'" not in docs_policy  # the /ui pages' policy
