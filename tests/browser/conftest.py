"""Browser tests: Selenium drives the Debian headless Chromium (through the Debian chromedriver) against
real server processes on both stores. ``scripts/chromium-local.sh`` (run by ``make test``) installs
them; without them these tests are skipped with the command to run.

With SMART_TRANSFER_UI_SCREENSHOTS=1 each page visited is saved under bench-results/ui/."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from smart_transfer.model import DataField, SetDataSchema, SetInfo
from smart_transfer.repo import Workspace
from smart_transfer.server.auth import add_token
from tests.conftest import ROOT, ServerProcess, backend_args, run_cli, start_server, summary
from tests.slices import add_slices

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
#: Bound on loading one page, on a script, and on finding an element (seconds).
PAGE_LOAD_SECONDS = 20.0
#: Bound on waiting for something a page does after it loaded (a script's effect, a reload's).
WAIT_SECONDS = 10.0
#: Set to 1 to save a screenshot of each page under SCREENSHOT_DIR.
SCREENSHOTS_ENV = "SMART_TRANSFER_UI_SCREENSHOTS"
SCREENSHOT_DIR = ROOT / "bench-results" / "ui"
CHROMIUM_ARGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
)
#: A value that would run if a page failed to escape it.
XSS = "<script>alert(1)</script>"
#: Dataset fields holding HTML (a SetInfo description and a schema column name and type).
HTML_DESCRIPTION = '<img src=x onerror="alert(2)"><b>bold</b>'
HTML_COLUMN = "<i>col</i>"


@dataclass
class UiServer:
    """A server with a tokens file and datasets pushed to it."""

    server: ServerProcess
    backend: str
    tokens_file: Path
    tokens: dict[str, str]
    workspace: Path
    #: alice reads pub-*; carol reads everything (and is revoked in a test); the writer pushes.
    readable: dict[str, list[str]] = field(default_factory=dict)


def _seed_datasets(url: str, workspace: Path, work: Path, writer: str) -> dict[str, str]:
    """Push the test datasets: pub-rich (3 slices, a schema, an HTML description, an XSS record, 7
    blocks), pub-b, pub-c and secret-d (1 slice), raw-bytes (a slice that is not Parquet)."""
    names = {n: f"{url}/{n}" for n in ("pub-rich", "pub-b", "pub-c", "raw-bytes", "secret-d")}
    add_slices(workspace, "pub-rich", work / "rich", [10, 10, 5], row_group_size=4)
    with Workspace(workspace) as opened:
        fields = (
            DataField("offset", "BIGINT", False),
            DataField("name", "STRING"),
            DataField("amount", "BIGINT"),
            DataField(HTML_COLUMN, XSS),
        )
        opened.dataset("pub-rich").append([SetDataSchema(fields), SetInfo(HTML_DESCRIPTION, ("<u>kw</u>",))])
    _add_xss_slice(workspace, work / "xss", "pub-rich", 25)
    for name in ("pub-b", "pub-c", "secret-d"):
        add_slices(workspace, name, work / name, [3])
    not_parquet = work / "raw.bin"
    not_parquet.write_bytes(b"not parquet at all " * 10)
    assert run_cli("add", "raw-bytes", str(not_parquet), "--records", "2", workspace=workspace).returncode == 0
    for name, dataset_url in names.items():
        summary(run_cli("push", name, dataset_url, "--token", writer, "--json", workspace=workspace))
    return names


def _add_xss_slice(workspace: Path, directory: Path, name: str, start: int) -> None:
    """One slice of two rows whose last name is XSS."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "xss.parquet"
    table = pa.table(
        {
            "offset": pa.array([start, start + 1], pa.int64()),
            "name": ["plain", XSS],
            "amount": pa.array([1, 2], pa.int64()),
        }
    )
    pq.write_table(table, path)
    result = run_cli("add", name, str(path), "--records", "2", workspace=workspace)
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module", params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def ui_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiServer]:
    """A server per store with a tokens file (alice: pub-*, carol: everything) and five datasets."""
    s3 = request.getfixturevalue("s3_env") if request.param == "s3" else None
    root = tmp_path_factory.mktemp(f"ui-{request.param}")
    tokens_file = root / "tokens.json"
    tokens = {
        "writer": add_token(tokens_file, "writer", [], ["*"]),
        "alice": add_token(tokens_file, "alice", ["pub-*"], []),
        "carol": add_token(tokens_file, "carol", ["*"], []),
    }
    server = start_server(root / "server", "--tokens", str(tokens_file), *backend_args(request.param, s3))
    server.backend = request.param
    try:
        workspace = root / "workspace"
        _seed_datasets(server.url, workspace, root / "in", tokens["writer"])
        yield UiServer(
            server,
            request.param,
            tokens_file,
            tokens,
            workspace,
            {
                "alice": ["pub-b", "pub-c", "pub-rich"],
                "carol": ["pub-b", "pub-c", "pub-rich", "raw-bytes", "secret-d"],
            },
        )
    finally:
        server.stop()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    """A fresh headless Chromium (its own profile directory), quit afterwards."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip("no Chromium: run `bash scripts/chromium-local.sh` (make test does)")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(CHROMIUM)
    for argument in CHROMIUM_ARGS:
        options.add_argument(argument)
    options.add_argument(f"--user-data-dir={tmp_path / f'chromium-{secrets.token_hex(4)}'}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console messages, for get_log
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(PAGE_LOAD_SECONDS)
    driver.set_script_timeout(PAGE_LOAD_SECONDS)
    try:
        yield driver
    finally:
        driver.quit()


def screenshot(driver: object, name: str) -> None:
    """Save the page as bench-results/ui/NAME.png when SMART_TRANSFER_UI_SCREENSHOTS=1."""
    if os.environ.get(SCREENSHOTS_ENV) != "1":
        return
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    import base64

    # the whole page, not only the window: Chromium's DevTools capture beyond the viewport
    width, height = driver.execute_script(  # type: ignore[attr-defined]
        "return [window.innerWidth, document.documentElement.scrollHeight]"
    )
    clip = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
    shot = driver.execute_cdp_cmd(  # type: ignore[attr-defined]
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
    )
    (SCREENSHOT_DIR / f"{name}.png").write_bytes(base64.b64decode(shot["data"]))
