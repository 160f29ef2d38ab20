"""The version pages of the web view in a real browser (headless Chromium) against a real server on both
stores: a block's page (its rows equal ``export --blocks`` of that block, its checkpoint's files, its
neighbours), the comparison of two blocks chosen on the chain (equal to ``diff --json``), escaping of
HTML in column names, values and dataset fields, and bad versions answered with a 400 or 404 page."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from smart_transfer.model import DataField, SetDataSchema, SetInfo
from smart_transfer.reading.dataset import open_dataset
from smart_transfer.repo import Workspace
from smart_transfer.server.auth import add_token
from tests.browser.conftest import HTML_COLUMN, HTML_DESCRIPTION, XSS, screenshot
from tests.browser.test_ui import _by, _no_dialog, _sign_in, _status, _wait
from tests.conftest import ServerProcess, backend_args, run_cli, start_server, summary
from tests.scale import commit_checkpoint, write_checkpoint
from tests.slices import add_slices

NAME = "ev-rich"
#: The checkpoint block's files.
CHECKPOINT_FILES = ["000001.sst", "000002.sst", "CURRENT", "MANIFEST-000003"]


@dataclass
class VersionsServer:
    server: ServerProcess
    backend: str
    workspace: Path
    token: str


def _xss_slice(workspace: Path, directory: Path) -> None:
    """Block 3: three rows whose column names and values hold HTML."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "xss.parquet"
    table = pa.table(
        {
            "offset": pa.array([10, 11, 12], pa.int64()),
            "name": ["plain", XSS, HTML_DESCRIPTION],
            "amount": pa.array([1, 2, 3], pa.int64()),
            HTML_COLUMN: [XSS, "b", None],
        }
    )
    pq.write_table(table, path)
    assert run_cli("add", NAME, str(path), "--records", "3", workspace=workspace).returncode == 0


def _seed(workspace: Path, work: Path) -> None:
    """Seed, a 10-row slice in row groups of 4, a schema, the HTML slice, a second schema (a column
    changed, one added, one removed), an HTML description, a checkpoint: blocks 0 to 6."""
    add_slices(workspace, NAME, work / "a", [10], row_group_size=4)
    first = (DataField("offset", "BIGINT", False), DataField("name", "STRING"), DataField("amount", "BIGINT"))
    with Workspace(workspace) as opened:
        opened.dataset(NAME).append([SetDataSchema(first)])
    _xss_slice(workspace, work / "xss")
    second = (DataField("offset", "BIGINT", False), DataField("amount", "DOUBLE"), DataField(HTML_COLUMN, XSS))
    with Workspace(workspace) as opened:
        opened.dataset(NAME).append([SetDataSchema(second), SetInfo(HTML_DESCRIPTION, ("<u>kw</u>",))])
        commit_checkpoint(opened, NAME, write_checkpoint(work / "checkpoint", CHECKPOINT_FILES, "1"))


@pytest.fixture(scope="module", params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def versions_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VersionsServer]:
    """A server per store with a tokens file (a reader of ev-*) and one 7-block dataset pushed to it."""
    s3 = request.getfixturevalue("s3_env") if request.param == "s3" else None
    root = tmp_path_factory.mktemp(f"versions-{request.param}")
    tokens_file = root / "tokens.json"
    writer = add_token(tokens_file, "writer", [], ["*"])
    reader = add_token(tokens_file, "reader", ["ev-*"], [])
    server = start_server(root / "server", "--tokens", str(tokens_file), *backend_args(request.param, s3))
    try:
        workspace = root / "workspace"
        _seed(workspace, root / "in")
        summary(run_cli("push", NAME, f"{server.url}/{NAME}", "--token", writer, "--json", workspace=workspace))
        yield VersionsServer(server, request.param, workspace, reader)
    finally:
        server.stop()


def _table(driver: Any, selector: str) -> list[list[str]]:
    rows = driver.find_elements(_by("CSS_SELECTOR"), f"{selector} tbody tr")
    return [[cell.text for cell in row.find_elements(_by("TAG_NAME"), "td")] for row in rows]


def _exported(workspace: Path, blocks: tuple[int, int]) -> list[list[str]]:
    """The records of blocks ``blocks`` read through the SDK (what ``export --blocks`` writes), each
    value as the pages show it."""
    with open_dataset(workspace, NAME) as dataset:
        rows = dataset.to_arrow(blocks=blocks).to_pylist()
    return [["null" if value is None else str(value) for value in row.values()] for row in rows]


def _preview_bytes(versions: VersionsServer) -> float:
    metrics = _status(f"{versions.server.url}/metrics", token=versions.token)[1].decode()
    counted = [line for line in metrics.splitlines() if line.startswith("smart_transfer_preview_bytes_total ")]
    return float(counted[0].split()[1]) if counted else 0.0


def test_a_block_page_shows_its_slice_and_the_rows_export_writes(versions_server: VersionsServer, browser: Any) -> None:
    url, workspace = versions_server.server.url, versions_server.workspace
    with Workspace.open_existing(workspace, read_only=True) as opened:
        hashes = {seq: str(opened.dataset(NAME).hash_at(seq)) for seq in (0, 1)}
    _sign_in(browser, url, versions_server.token)
    read_before = _preview_bytes(versions_server)

    browser.get(f"{url}/ui/datasets/{NAME}")
    browser.find_element(_by("CSS_SELECTOR"), "#chain tr[data-sequence='1'] td a").click()  # the chain links it
    _wait(browser, lambda d: d.find_elements(_by("ID"), "block-hash"))
    assert browser.current_url == f"{url}/ui/datasets/{NAME}/blocks/1"
    assert browser.find_element(_by("ID"), "block-hash").text == hashes[1]  # in full
    assert browser.find_element(_by("ID"), "prev-hash").text == hashes[0]
    assert browser.find_element(_by("ID"), "kind").text == "AddData"
    assert browser.find_element(_by("ID"), "slice-offsets").text == "0-9"

    # the rows of the block, page by page (4 a page, row groups of 4), equal the rows export writes
    browser.get(f"{url}/ui/datasets/{NAME}/blocks/{hashes[1]}?per=4")  # a block by its hash too
    shown = _table(browser, "#rows")
    for number in ("page 2 of 3", "page 3 of 3"):
        browser.find_element(_by("ID"), "next-page").click()
        _wait(browser, lambda d, wanted=number: d.find_element(_by("ID"), "page-of").text == wanted)
        shown += _table(browser, "#rows")
    assert not browser.find_elements(_by("ID"), "next-page")
    assert shown == _exported(workspace, (1, 1)) and len(shown) == 10
    assert _preview_bytes(versions_server) > read_before  # the rows read are counted

    # HTML in column names and values stays text
    browser.get(f"{url}/ui/datasets/{NAME}/blocks/3")
    columns = [cell.text for cell in browser.find_elements(_by("CSS_SELECTOR"), "#rows thead th")]
    assert columns == ["offset", "name", "amount", HTML_COLUMN]
    assert _table(browser, "#rows") == _exported(workspace, (3, 3))
    _no_dialog(browser)
    screenshot(browser, f"block-{versions_server.backend}")

    browser.find_element(_by("ID"), "next-block").click()  # block 4: the schema it sets
    _wait(browser, lambda d: d.find_elements(_by("ID"), "block-schema"))
    assert _table(browser, "#block-schema")[-1] == [HTML_COLUMN, XSS, "yes"]
    browser.get(f"{url}/ui/datasets/{NAME}/blocks/5")
    assert browser.find_element(_by("ID"), "block-description").text == HTML_DESCRIPTION
    _no_dialog(browser)

    browser.get(f"{url}/ui/datasets/{NAME}/blocks/6")  # the checkpoint block lists its files
    assert [row[0] for row in _table(browser, "#checkpoint-files")] == sorted(CHECKPOINT_FILES)
    assert not browser.find_elements(_by("ID"), "next-block") and browser.find_elements(_by("ID"), "prev-block")


def test_a_comparison_chosen_on_the_chain_equals_diff_json(versions_server: VersionsServer, browser: Any) -> None:
    url, workspace = versions_server.server.url, versions_server.workspace
    _sign_in(browser, url, versions_server.token)
    browser.get(f"{url}/ui/datasets/{NAME}")
    browser.find_element(_by("CSS_SELECTOR"), "#chain tr[data-sequence='2'] input[name=from]").click()
    browser.find_element(_by("CSS_SELECTOR"), "#chain tr[data-sequence='6'] input[name=to]").click()
    browser.find_element(_by("ID"), "compare-chosen").click()
    _wait(browser, lambda d: d.find_elements(_by("ID"), "cmp-blocks"))
    chosen = urlsplit(browser.current_url)
    assert chosen.path == f"/ui/datasets/{NAME}/compare" and parse_qs(chosen.query) == {"from": ["2"], "to": ["6"]}
    _no_dialog(browser)
    screenshot(browser, f"compare-{versions_server.backend}")

    expected = summary(run_cli("diff", NAME, "2", "6", "--json", workspace=workspace))

    def value(element_id: str) -> int:
        return int(browser.find_element(_by("ID"), element_id).get_attribute("data-value"))

    assert browser.find_element(_by("ID"), "from-hash").text == expected["from"]["hash"]
    assert browser.find_element(_by("ID"), "to-hash").text == expected["to"]["hash"]
    assert value("cmp-blocks") == expected["blocks"] == 4
    assert value("cmp-records") == expected["records"] == len(_exported(workspace, (3, 6))) == 3
    assert value("cmp-data-bytes") == expected["data_bytes"]
    assert value("cmp-checkpoint-bytes") == expected["checkpoint_bytes"] > 0
    events = {
        e.get_attribute("data-kind"): int(e.get_attribute("data-value"))
        for e in browser.find_elements(_by("CSS_SELECTOR"), "#cmp-blocks .event")
    }
    assert events == expected["events"] == {"AddData": 2, "SetDataSchema": 1, "SetInfo": 1}
    slices = [row[-1] for row in _table(browser, "#cmp-slices")]
    assert slices == [s["physical_hash"] for s in expected["slices"]]
    changes = [row[:2] for row in _table(browser, "#schema-changes")]
    assert changes == [[c["change"], c["name"]] for c in expected["schema_changes"]]
    assert changes == [["changed", "amount"], ["added", HTML_COLUMN], ["removed", "name"]]
    assert _table(browser, "#schema-changes")[1][3] == XSS  # a type holding HTML, as text


def test_bad_versions_and_other_datasets_get_a_page_saying_so(versions_server: VersionsServer) -> None:
    url, token = versions_server.server.url, versions_server.token
    base = f"{url}/ui/datasets/{NAME}"
    cases = {
        f"{base}/blocks/7": (404, "has no block 7: its blocks are 0 to 6"),
        f"{base}/blocks/f1220{'0' * 64}": (404, "on its chain"),
        f"{base}/blocks/nope": (400, "not a block"),
        f"{base}/blocks/1?page=9&per=4": (404, "past the end"),
        f"{base}/compare?from=6&to=2": (400, "is after to"),
        f"{base}/compare?from=99": (404, "has no block 99"),
        f"{url}/ui/datasets/other/compare": (403, "reader may not read other"),
    }
    for path, (status, fragment) in cases.items():
        code, body = _status(path, cookie=token)
        assert code == status and fragment.encode() in body and b"Traceback" not in body, path
    assert _status(f"{base}/blocks/1")[0] == 401  # signed out: the sign-in form
