"""The version pages of the web view in a real browser (headless Chromium) against a real server on both
stores: a block's page (its rows equal ``export --blocks`` of that block, its checkpoint's files, its
neighbours), the comparison of two blocks chosen on the chain (equal to ``diff --json``), the downloads (a
slice from the store, byte-identical, no object bytes through the server; CSV equal to ``export``'s), the
growth chart (the chain's figures), escaping of HTML in column names, values and dataset fields, and bad
versions, slices and counts answered with a 400 or 404 page."""

from __future__ import annotations

import os
import secrets
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
from smart_transfer.reading.export import export
from smart_transfer.repo import Workspace
from smart_transfer.repo.compare import compare_versions
from smart_transfer.server.auth import add_token
from smart_transfer.server.ui.chart import BOTTOM, HEIGHT, TOP
from tests.browser.conftest import HTML_COLUMN, HTML_DESCRIPTION, SCREENSHOTS_ENV, XSS, screenshot
from tests.browser.test_ui import _by, _no_dialog, _sign_in, _status, _wait
from tests.conftest import ROOT, ServerProcess, backend_args, run_cli, start_server, summary
from tests.scale import commit_checkpoint, write_checkpoint
from tests.slices import add_slices

NAME = "ev-rich"
#: A dataset made with `add` alone (no SetDataSchema): its schemas come from its slices' footers.
PLAIN = "ev-plain"
#: axe-core, from the npm registry (tools/asyncapi-validate/package.json; `make node-deps` installs it).
AXE = ROOT / "tools" / "asyncapi-validate" / "node_modules" / "axe-core" / "axe.min.js"
#: Violations of these impacts fail the test (axe's others: moderate, minor).
AXE_FAILING = ("serious", "critical")
#: The narrowest width the pages must lay out without breaking a name or a number (px).
NARROW = 360
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


def _seed_plain(workspace: Path, work: Path) -> None:
    """Two slices added with `add` and no schema block; the second has one column more (blocks 0 to 2)."""
    work.mkdir(parents=True)
    first = {"offset": pa.array([0, 1], pa.int64()), "name": ["a", "b"]}
    for number, columns in enumerate([first, {"offset": pa.array([2], pa.int64()), "name": ["c"], "score": [1.5]}]):
        pq.write_table(pa.table(columns), work / f"{number}.parquet")
        added = run_cli(
            "add", PLAIN, str(work / f"{number}.parquet"), "--records", str(len(columns["offset"])), workspace=workspace
        )
        assert added.returncode == 0, added.stderr


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
        _seed_plain(workspace, root / "plain")
        for name in (NAME, PLAIN):
            summary(run_cli("push", name, f"{server.url}/{name}", "--token", writer, "--json", workspace=workspace))
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
    assert browser.find_element(_by("ID"), "block-hash").get_attribute("textContent") == hashes[1]  # in full
    assert browser.find_element(_by("ID"), "prev-hash").get_attribute("textContent") == hashes[0]
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

    assert browser.find_element(_by("ID"), "from-hash").get_attribute("textContent") == expected["from"]["hash"]
    assert browser.find_element(_by("ID"), "to-hash").get_attribute("textContent") == expected["to"]["hash"]
    assert value("cmp-blocks") == expected["blocks"] == 4
    assert value("cmp-records") == expected["records"] == len(_exported(workspace, (3, 6))) == 3
    assert value("cmp-data-bytes") == expected["data_bytes"]
    assert value("cmp-checkpoint-bytes") == expected["checkpoint_bytes"] > 0
    events = {
        e.get_attribute("data-kind"): int(e.get_attribute("data-value"))
        for e in browser.find_elements(_by("CSS_SELECTOR"), "#cmp-blocks .event")
    }
    assert events == expected["events"] == {"AddData": 2, "SetDataSchema": 1, "SetInfo": 1}
    slices = [c.get_attribute("textContent") for c in browser.find_elements(_by("CSS_SELECTOR"), "#cmp-slices code")]
    assert slices == [s["physical_hash"] for s in expected["slices"]]
    changes = [row[:2] for row in _table(browser, "#schema-changes")]
    assert changes == [[c["change"], c["name"]] for c in expected["schema_changes"]]
    assert changes == [["changed", "amount"], ["added", HTML_COLUMN], ["removed", "name"]]
    assert _table(browser, "#schema-changes")[1][3] == XSS  # a type holding HTML, as text


#: A number of more digits than Python converts to an int (4,300).
HUGE = "9" * 4301


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
        f"{base}/slices/nope/parquet": (400, "not a slice hash"),
        f"{base}/slices/f1220{'0' * 64}/parquet": (404, "no committed data object"),
        f"{base}/blocks/0/csv": (404, "adds no data slice"),
        f"{base}/blocks/99/csv": (404, "has no block 99"),
        f"{base}/csv?last=0": (400, "last must be a whole number from 1 to 1000000"),
        f"{base}/csv?last=%3Cscript%3E": (400, "last must be"),
        f"{url}/ui/datasets/other/csv": (403, "reader may not read other"),
        # numbers longer than Python converts (4,300 digits) are read by length first: a 400, never a 500
        f"{base}/blocks/{HUGE}": (400, "not a block"),
        f"{base}/blocks/{'9' * 4300}": (400, "not a block"),
        f"{base}/blocks/{HUGE}/csv": (400, "not a block"),
        f"{base}/blocks/1?page={HUGE}": (400, "page must be a whole number from 1"),
        f"{base}/blocks/1?per={HUGE}": (400, "per must be a whole number from 1 to 500"),
        f"{base}/compare?from={HUGE}": (400, "not a block"),
        f"{base}/compare?to={HUGE}": (400, "not a block"),
        f"{base}/compare?from=-1": (400, "not a block"),
        f"{base}/compare?from=1.5": (400, "not a block"),
        f"{base}/compare?to=%D9%A3": (400, "not a block"),  # an Arabic-Indic three: no ASCII digit
        f"{base}/csv?last={HUGE}": (400, "last must be a whole number from 1 to 1000000"),
        f"{base}/csv?last=%2B5%00": (400, "last must be"),
    }
    for path, (status, fragment) in cases.items():
        code, body = _status(path, cookie=token)
        assert code == status and fragment.encode() in body and b"Traceback" not in body, path
    assert _status(f"{base}/blocks/1")[0] == 401  # signed out: the sign-in form


def test_a_comparison_without_schema_blocks_reads_the_slices_footers(
    versions_server: VersionsServer, browser: Any
) -> None:
    url, workspace = versions_server.server.url, versions_server.workspace
    expected = summary(run_cli("diff", PLAIN, "1", "2", "--json", workspace=workspace))
    assert [(c["change"], c["name"], c["after"]["type"]) for c in expected["schema_changes"]] == [
        ("added", "score", "DOUBLE")
    ]
    assert (expected["schema_source_before"], expected["schema_source_after"]) == ("footer", "footer")
    _sign_in(browser, url, versions_server.token)
    browser.get(f"{url}/ui/datasets/{PLAIN}/compare?from=1&to=2")
    changes = _table(browser, "#schema-changes")
    assert [[*row[:2], row[3]] for row in changes] == [["added", "score", "DOUBLE"]]
    sources = browser.find_element(_by("ID"), "schema-sources")
    assert (sources.get_attribute("data-before"), sources.get_attribute("data-after")) == ("footer", "footer")


def _axe_failures(driver: Any) -> list[str]:
    """axe-core's serious and critical violations on the page loaded (its script injected by the driver,
    which the page's Content-Security-Policy does not govern)."""
    driver.execute_script(AXE.read_text())
    found = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']}).then("
        "  (r) => done(r.violations.map((v) => [v.impact, v.id, v.nodes.map((n) => n.target.join(' ')).slice(0, 3)])),"
        "  (e) => done([['critical', 'axe failed', [String(e)]]]));"
    )
    return [f"{rule} {targets}" for impact, rule, targets in found if impact in AXE_FAILING]


#: Text that breaks across lines in a cell, a heading, a time or a copyable command: elements whose text
#: lies on more than one line, and the page's width beyond the window's.
_BROKEN_LAYOUT = """
const lines = (element) => {
  const bottoms = new Set();
  const texts = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  for (let text = texts.nextNode(); text; text = texts.nextNode()) {
    if (text.parentElement.closest(".elided")) continue;  // a hash's hidden part: out of sight by design
    const range = document.createRange();
    range.selectNodeContents(text);
    for (const rect of range.getClientRects()) if (rect.width > 0) bottoms.add(Math.round(rect.bottom));
  }
  return bottoms.size;
};
const kept = "td:not(.wrap), th, h1, time, a.dataset, .copyable > code, p code:not(.long)";
const broken = [...document.querySelectorAll(kept)]
  .filter((e) => lines(e) > 1).map((e) => e.tagName + " " + e.textContent.slice(0, 30));
const page = document.documentElement;
if (page.scrollWidth > page.clientWidth) broken.push("page wider than the window: " + page.scrollWidth);
return broken;
"""


def test_every_page_passes_axe_and_keeps_names_and_numbers_whole(versions_server: VersionsServer, browser: Any) -> None:
    assert AXE.exists(), "no axe-core: `make test` installs it (make node-deps)"
    url = versions_server.server.url
    base = f"{url}/ui/datasets/{NAME}"
    pages = {
        "signin": f"{url}/ui/signin",
        "list": f"{url}/ui",
        "dataset": base,
        "block": f"{base}/blocks/3",
        "checkpoint": f"{base}/blocks/6",
        "compare": f"{base}/compare?from=2&to=6",
        "server": f"{url}/ui/server",
        "error": f"{base}/blocks/99",
    }
    # each page once, narrow (axe's rules hold at any width); with screenshots on, wide too
    widths = (1280, 390) if os.environ.get(SCREENSHOTS_ENV) == "1" else (NARROW,)
    failures: dict[str, list[str]] = {}
    for page, address in pages.items():
        if page == "list":
            _sign_in(browser, url, versions_server.token)
        for width in widths:
            browser.set_window_size(width, 900)
            browser.get(address)
            screenshot(browser, f"ui-{page}-{width}")
            if width == widths[-1]:
                failures[page] = _axe_failures(browser) + browser.execute_script(_BROKEN_LAYOUT)
    assert browser.execute_script("return window.innerWidth") <= 390  # the narrow width took effect
    assert {page: found for page, found in failures.items() if found} == {}
    assert _status(f"{base}/blocks/1/csv")[0] == 401


def _through_server(versions: VersionsServer) -> int:
    """The server's object-bytes counter (bytes of objects that went through the server process)."""
    metrics = _status(f"{versions.server.url}/metrics", token=versions.token)[1].decode()
    prefix = "smart_transfer_object_bytes_through_server_total "
    counted = [line for line in metrics.splitlines() if line.startswith(prefix)]
    return int(float(counted[0].split()[1])) if counted else 0


def _exported_csv(workspace: Path, tmp_path: Path, **selection: tuple[int, int]) -> bytes:
    """What ``export --format csv`` writes for the selection (its function, in this process)."""
    out = tmp_path / f"export-{secrets.token_hex(4)}.csv"
    with open_dataset(workspace, NAME) as dataset:
        export(dataset, str(out), "csv", **selection)
    return out.read_bytes()


def test_downloads_and_the_growth_chart(versions_server: VersionsServer, browser: Any, tmp_path: Path) -> None:
    """A slice downloads byte-identical from the store (no object bytes through the server), a block's and
    the last records download as export's CSV, and the growth chart draws the chain's figures."""
    url, workspace, token = versions_server.server.url, versions_server.workspace, versions_server.token
    _sign_in(browser, url, token)
    browser.get(f"{url}/ui/datasets/{NAME}/blocks/1")
    parquet_link = browser.find_element(_by("ID"), "slice-parquet").get_attribute("href")
    csv_link = browser.find_element(_by("ID"), "block-csv").get_attribute("href")
    with open_dataset(workspace, NAME) as dataset:
        slice_file, entry = dataset.files(blocks=(1, 1))[0], dataset.slices(blocks=(1, 1))[0]
    assert parquet_link == f"{url}/ui/datasets/{NAME}/slices/{entry.data.physical_hash}/parquet"
    assert csv_link == f"{url}/ui/datasets/{NAME}/blocks/1/csv"
    _slice_download_skips_the_server(versions_server, parquet_link, slice_file.read_bytes())
    _csv_downloads_equal_export(versions_server, tmp_path, csv_link)

    browser.get(f"{url}/ui/datasets/{NAME}")  # the dataset page's downloads: a form and each slice's links
    form = browser.find_element(_by("ID"), "last-csv-form")
    assert form.get_attribute("action") == f"{url}/ui/datasets/{NAME}/csv"
    assert browser.find_element(_by("ID"), "last-rows").get_attribute("name") == "last"
    rows = browser.find_elements(_by("CSS_SELECTOR"), "#slice-downloads tbody tr")
    assert [row.get_attribute("data-sequence") for row in rows] == ["3", "1"]
    assert browser.find_elements(_by("CSS_SELECTOR"), "#slice-downloads a.parquet")[1].get_attribute("href") == (
        parquet_link
    )
    csv_texts = [a.text for a in browser.find_elements(_by("CSS_SELECTOR"), "#slice-downloads a.csv")]
    assert csv_texts == [f"{NAME}-block-3.csv", f"{NAME}-block-1.csv"]
    _no_dialog(browser)
    _the_chart_draws_the_chain_figures(browser, workspace)
    browser.execute_script("arguments[0].scrollIntoView()", browser.find_element(_by("ID"), "growth"))
    screenshot(browser, f"growth-{versions_server.backend}")
    violations = [e["message"] for e in browser.get_log("browser") if "Content Security Policy" in e["message"]]
    assert violations == []


def _slice_download_skips_the_server(versions: VersionsServer, link: str, expected: bytes) -> None:
    """The link redirects to a presigned store URL; its bytes equal the slice's; none go through the server."""
    import httpx

    assert versions.token not in link  # the sign-in cookie authorizes, never the link
    before = _through_server(versions)
    cookies = {"smart_transfer_token": versions.token}
    answer = httpx.get(link, cookies=cookies, follow_redirects=False, timeout=20)
    assert answer.status_code == 307 and answer.headers["location"] != link
    assert _through_server(versions) == before  # the redirect moved no object bytes
    downloaded = httpx.get(answer.headers["location"], timeout=20)  # no cookie, no token: the URL is signed
    assert downloaded.status_code == 200 and downloaded.content == expected
    # on S3 the bytes came from the store; the embedded store's /_store face stands in for S3 in the server's
    # process and counts exactly what it served
    moved = _through_server(versions) - before
    assert moved == (0 if versions.backend == "s3" else len(expected))
    assert httpx.get(link, follow_redirects=False, timeout=20).status_code == 401  # no cookie: no URL


def _csv_downloads_equal_export(versions: VersionsServer, tmp_path: Path, block_link: str) -> None:
    """A block's records (HTML in its column names and values) and the last records as CSV: export's bytes."""
    import httpx

    url, workspace = versions.server.url, versions.workspace
    cookies = {"smart_transfer_token": versions.token}
    block_csv = httpx.get(f"{url}/ui/datasets/{NAME}/blocks/3/csv", cookies=cookies, timeout=20)
    assert block_csv.status_code == 200 and block_csv.headers["content-type"] == "text/csv; charset=utf-8"
    assert block_csv.headers["x-content-type-options"] == "nosniff"  # never sniffed as HTML
    assert block_csv.headers["content-disposition"] == f'attachment; filename="{NAME}-block-3.csv"'
    assert block_csv.content == _exported_csv(workspace, tmp_path, blocks=(3, 3))
    assert XSS.encode() in block_csv.content and HTML_COLUMN.encode() in block_csv.content
    block_one = httpx.get(block_link, cookies=cookies, timeout=20).content
    assert block_one == _exported_csv(workspace, tmp_path, blocks=(1, 1)) and block_one.count(b"\n") == 11
    last = httpx.get(f"{url}/ui/datasets/{NAME}/csv?last=5", cookies=cookies, timeout=20)  # two slices' rows
    assert last.status_code == 200 and last.content == _exported_csv(workspace, tmp_path, offsets=(8, 12))


def _the_chart_draws_the_chain_figures(driver: Any, workspace: Path) -> None:
    """Each chart's points, drawn to scale, and its table equal the figures ``diff 0 K --json`` gives."""
    with Workspace.open_existing(workspace, read_only=True) as opened:
        dataset = opened.dataset(NAME)
        tip = dataset.require_tip()
        compared = [compare_versions(dataset, tip, "0", str(seq)).to_dict() for seq in range(7)]
    expected = {"records": [c["records"] for c in compared], "data_bytes": [c["data_bytes"] for c in compared]}
    assert expected["records"] == [0, 10, 10, 13, 13, 13, 13]
    for key, values in expected.items():
        chart = driver.find_element(_by("ID"), f"growth-{key}")
        assert chart.get_attribute("role") == "img"
        title = driver.find_element(_by("ID"), f"growth-{key}-title").get_attribute("textContent")
        assert title.endswith(f"over versions of {NAME}")
        points = chart.find_elements(_by("CSS_SELECTOR"), "circle.point")
        assert [int(p.get_attribute("data-sequence")) for p in points] == list(range(7))
        assert [int(p.get_attribute("data-value")) for p in points] == values
        # drawn to scale: from the axis at block 0 up to the top at the largest value, never down
        heights = [float(p.get_attribute("cy")) for p in points]
        assert heights[0] == HEIGHT - BOTTOM and heights[-1] == TOP and heights == sorted(heights, reverse=True)
        assert float(chart.get_attribute("data-top")) == max(values)
    table = [
        [int(cell.get_attribute("data-value") or cell.get_attribute("textContent")) for cell in cells]
        for cells in (
            row.find_elements(_by("TAG_NAME"), "td")
            for row in driver.find_elements(_by("CSS_SELECTOR"), "#growth-table tbody tr")
        )
    ]
    assert table == [[seq, expected["records"][seq], expected["data_bytes"][seq]] for seq in range(7)]
