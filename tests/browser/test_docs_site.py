"""The documentation site in a real browser: the built site's home, tutorial, command-line and SDK pages
render with no console error, search finds pages, and no page asks another origin for anything (no web
fonts, no external script). Set SMART_TRANSFER_DOCS_SCREENSHOTS=DIR to save a screenshot of each page."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import PAGE_LOAD_SECONDS, WAIT_SECONDS
from tests.conftest import ROOT, free_port

#: page path -> a text the rendered page must show
PAGES = {
    "": "Find your way",
    "tutorial/": "Read it with pandas",
    "reference/cli/": "pull a dataset from a server into the workspace",
    "reference/sdk/": "SyncClient",
}
SCREENSHOTS_ENV = "SMART_TRANSFER_DOCS_SCREENSHOTS"
BUILD_SECONDS = 240


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The site built from this checkout, served by a static HTTP server process on 127.0.0.1."""
    directory = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(directory)],
        cwd=ROOT,
        check=True,
        timeout=BUILD_SECONDS,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(directory)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        try:
            urllib.request.urlopen(base, timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                server.kill()
                raise
            time.sleep(0.1)
    try:
        yield base
    finally:
        server.terminate()
        server.wait(timeout=10)


def _wait(driver: Any, condition: str) -> Any:
    """The value of the JavaScript expression ``condition`` once it is truthy (bounded)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        value = driver.execute_script(f"return {condition};")
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{condition} stayed false for {WAIT_SECONDS} s")


def _screenshot(driver: Any, name: str) -> None:
    directory = os.environ.get(SCREENSHOTS_ENV)
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(directory) / f"docs-{name}.png"))


@pytest.mark.parametrize("path", list(PAGES), ids=lambda p: p.strip("/") or "home")
def test_a_page_renders_with_no_console_error_and_no_other_origin(site: str, browser: Any, path: str) -> None:
    browser.set_page_load_timeout(PAGE_LOAD_SECONDS)
    browser.get(site + path)
    _wait(browser, "document.readyState === 'complete'")
    assert PAGES[path] in browser.find_element("tag name", "body").text
    _screenshot(browser, path.strip("/").replace("/", "-") or "home")
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors
    resources = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name);")
    assert resources, "the page loaded no stylesheet or script at all"
    elsewhere = [url for url in resources if not url.startswith(site)]
    assert not elsewhere, f"requests to another origin: {elsewhere}"


def test_search_finds_pages(site: str, browser: Any) -> None:
    browser.get(site)
    _wait(browser, "document.readyState === 'complete'")
    box = browser.find_element("css selector", "input.md-search__input")
    box.click()
    box.send_keys("presigned")
    count = _wait(browser, "document.querySelectorAll('.md-search-result__item').length")
    assert count > 0
    text = browser.find_element("css selector", ".md-search-result").text
    assert "presigned" in text.lower()
    _screenshot(browser, "search")
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
