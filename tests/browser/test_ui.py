"""The web view in a real browser (headless Chromium through Selenium) against a real server on both
stores: what a token may read, a dataset's chain, schema and last records (equal to `tail`'s), the
pull command, paging and filtering, escaping, sign-out and revocation, and bad input."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

import orjson
import pytest

from smart_transfer.server.auth import revoke_tokens
from tests.browser.conftest import (
    HTML_COLUMN,
    HTML_DESCRIPTION,
    PAGE_LOAD_SECONDS,
    WAIT_SECONDS,
    XSS,
    UiServer,
    screenshot,
)
from tests.conftest import run_cli, summary


def _by(kind: str) -> Any:
    from selenium.webdriver.common.by import By

    return getattr(By, kind)


def _listed(driver: Any) -> list[str]:
    """Names of the datasets the list page shows (visible rows)."""
    rows = driver.find_elements(_by("CSS_SELECTOR"), "#datasets tbody tr")
    return [row.get_attribute("data-name") for row in rows if row.is_displayed()]


def _sequences(driver: Any) -> list[int]:
    """Sequence numbers of the chain rows the dataset page shows."""
    rows = driver.find_elements(_by("CSS_SELECTOR"), "#chain tbody tr")
    return [int(row.get_attribute("data-sequence")) for row in rows]


def _no_dialog(driver: Any) -> None:
    """No alert opened (waits a bounded moment for one)."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        WebDriverWait(driver, 1.0).until(expected_conditions.alert_is_present())
    except TimeoutException:
        return
    pytest.fail(f"a dialog opened: {driver.switch_to.alert.text!r}")


def _wait(driver: Any, condition: Any) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_SECONDS).until(condition)


def _sign_in(driver: Any, url: str, token: str) -> None:
    driver.get(f"{url}/ui/signin")
    driver.find_element(_by("ID"), "token").send_keys(token)
    driver.find_element(_by("ID"), "sign-in-submit").click()
    _wait(driver, lambda d: d.find_elements(_by("ID"), "sign-out"))


def _status(
    url: str, cookie: str | None = None, accept: str | None = None, token: str | None = None
) -> tuple[int, bytes]:
    """Status and body of a GET without following redirects (urllib, bounded)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any) -> None:
            return None

    request = urllib.request.Request(url)
    if cookie:
        request.add_header("Cookie", f"smart_transfer_token={cookie}")
    if accept:
        request.add_header("Accept", accept)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.build_opener(NoRedirect).open(request, timeout=PAGE_LOAD_SECONDS) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_the_list_shows_exactly_what_the_token_may_read(ui_server: UiServer, browser: Any) -> None:
    url = ui_server.server.url
    browser.get(f"{url}/ui")
    assert _listed(browser) == []  # anonymous reads nothing on a server with a tokens file: sign in
    assert browser.find_element(_by("ID"), "problem").text == "sign in with a token to see this page"
    assert _status(f"{url}/ui")[0] == 401  # the status REST answers without a token
    screenshot(browser, f"signed-out-{ui_server.backend}")

    _sign_in(browser, url, ui_server.tokens["alice"])
    assert _listed(browser) == ui_server.readable["alice"]
    assert browser.find_element(_by("ID"), "subject").text == "alice"
    assert "secret-d" not in browser.page_source
    assert ui_server.tokens["alice"] not in browser.page_source  # the secret is never shown
    head = browser.find_element(_by("CSS_SELECTOR"), "#datasets tbody tr[data-name=pub-rich] code")
    full = head.get_attribute("textContent")  # the full head, copied by its button, shown by its end
    assert len(full) == 69 and full.startswith("f1220") and head.get_attribute("title") == full
    assert head.text.endswith(full[-12:]) and head.size["width"] < 200
    screenshot(browser, f"datasets-{ui_server.backend}")
    cookie = browser.get_cookie("smart_transfer_token")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and "expiry" not in cookie

    browser.find_element(_by("ID"), "sign-out").click()
    _wait(browser, lambda d: d.find_elements(_by("ID"), "sign-in"))
    assert _listed(browser) == []


def test_a_dataset_page_shows_chain_schema_and_tails_rows(ui_server: UiServer, browser: Any, tmp_path: Any) -> None:
    url = ui_server.server.url
    _sign_in(browser, url, ui_server.tokens["alice"])
    browser.get(f"{url}/ui/datasets/pub-rich")
    _no_dialog(browser)
    screenshot(browser, f"dataset-{ui_server.backend}")

    sequences = [
        int(row.get_attribute("data-sequence")) for row in browser.find_elements(_by("CSS_SELECTOR"), "#chain tbody tr")
    ]
    assert sequences == [6, 5, 4, 3, 2, 1, 0]  # newest first
    kinds = [row.text for row in browser.find_elements(_by("CSS_SELECTOR"), "#chain tbody tr td:nth-child(3)")]
    assert kinds == ["AddData", "SetInfo", "SetDataSchema", "AddData", "AddData", "AddData", "Seed"]
    first_slice = browser.find_element(_by("CSS_SELECTOR"), "#chain tbody tr[data-sequence='1']").text
    assert "10" in first_slice and "0-9" in first_slice

    schema = [
        [cell.text for cell in row.find_elements(_by("TAG_NAME"), "td")]
        for row in browser.find_elements(_by("CSS_SELECTOR"), "#schema tbody tr")
    ]
    assert schema == [
        ["offset", "BIGINT", "no"],
        ["name", "STRING", "yes"],
        ["amount", "BIGINT", "yes"],
        [HTML_COLUMN, XSS, "yes"],
    ]
    assert browser.find_element(_by("ID"), "description").text == HTML_DESCRIPTION

    # the preview holds the rows `smart-transfer tail` prints for the same dataset
    workspace = tmp_path / "pulled"
    summary(run_cli("pull", f"{url}/pub-rich", "--token", ui_server.tokens["alice"], "--json", workspace=workspace))
    tail = run_cli("tail", "pub-rich", "--json", workspace=workspace)
    assert tail.returncode == 0, tail.stderr
    expected = [[str(value) for value in orjson.loads(line).values()] for line in tail.stdout.splitlines()]
    columns = [cell.text for cell in browser.find_elements(_by("CSS_SELECTOR"), "#preview thead th")]
    shown = [
        [cell.text for cell in row.find_elements(_by("TAG_NAME"), "td")]
        for row in browser.find_elements(_by("CSS_SELECTOR"), "#preview tbody tr")
    ]
    assert columns == ["offset", "name", "amount"]
    assert shown == expected and len(shown) == 20 and shown[-1][1] == XSS  # shown as text
    _no_dialog(browser)

    # the copy button copies the element it names: the exact pull command
    button = browser.find_element(_by("CSS_SELECTOR"), "button[data-copy=pull-command]")
    copied = browser.find_element(_by("ID"), button.get_attribute("data-copy")).text
    assert copied == f"smart-transfer pull {url}/pub-rich --token YOUR_TOKEN"  # a placeholder, never the token
    assert browser.find_element(_by("ID"), "sharing-link").get_attribute("href").endswith("#sharing")
    button.click()
    _no_dialog(browser)
    pandas = browser.find_element(_by("ID"), "sharing-pandas").text
    assert pandas == 'delta_sharing.load_as_pandas("me.share#smart-transfer.datasets.pub-rich", use_delta_format=True)'
    assert f"--url {url} --read pub-rich" in browser.find_element(_by("ID"), "sharing-profile").text

    # the preview's bytes are counted as data bytes through the server
    assert _status(f"{url}/metrics")[0] == 401  # a scrape needs a token on a server with tokens
    metrics = _status(f"{url}/metrics", token=ui_server.tokens["alice"])[1].decode()
    counted = [line for line in metrics.splitlines() if line.startswith("smart_transfer_preview_bytes_total ")]
    assert counted and float(counted[0].split()[1]) > 0


def test_paging_and_filtering(ui_server: UiServer, browser: Any) -> None:
    url = ui_server.server.url
    _sign_in(browser, url, ui_server.tokens["carol"])
    browser.get(f"{url}/ui?per=3")
    assert _listed(browser) == ["pub-b", "pub-c", "pub-rich"]
    assert browser.find_element(_by("ID"), "page-of").text == "page 1"  # in name order: paged by token
    browser.find_element(_by("ID"), "next-page").click()
    _wait(browser, lambda d: d.find_element(_by("ID"), "page-of").text == "page 2")
    assert _listed(browser) == ["raw-bytes", "secret-d"]

    browser.get(f"{url}/ui?sort=blocks&order=desc")
    assert _listed(browser)[0] == "pub-rich"

    browser.get(f"{url}/ui")
    box = browser.find_element(_by("ID"), "filter")
    box.send_keys("rich")  # the script hides the other rows while typing
    _wait(browser, lambda d: _listed(d) == ["pub-rich"])
    box.submit()  # and the server filters across pages
    _wait(browser, lambda d: "q=rich" in d.current_url)
    assert _listed(browser) == ["pub-rich"]
    assert len(browser.find_elements(_by("CSS_SELECTOR"), "#datasets tbody tr")) == 1

    browser.get(f"{url}/ui/datasets/pub-rich?per=3")
    sequences = [
        r.get_attribute("data-sequence") for r in browser.find_elements(_by("CSS_SELECTOR"), "#chain tbody tr")
    ]
    assert sequences == ["6", "5", "4"]
    browser.find_element(_by("ID"), "next-page").click()
    _wait(browser, lambda d: d.find_element(_by("ID"), "page-of").text == "page 2 of 3")
    sequences = [
        r.get_attribute("data-sequence") for r in browser.find_elements(_by("CSS_SELECTOR"), "#chain tbody tr")
    ]
    assert sequences == ["3", "2", "1"]


def test_bad_input_gets_a_page_saying_so(ui_server: UiServer, browser: Any) -> None:
    url = ui_server.server.url
    token = ui_server.tokens["alice"]
    _sign_in(browser, url, token)
    cases = {
        "/ui/datasets/pub-no-such": (404, "dataset pub-no-such does not exist"),
        "/ui/datasets/secret-d": (403, "alice may not read secret-d"),  # what REST answers
        "/ui/datasets/a..b": (403, "alice may not read a..b"),  # the grant is checked first, as on REST
        "/ui/datasets/pub-a..b": (400, "pub-a..b"),  # then the name: InvalidDatasetName, as on REST
        "/ui/datasets/pub-rich?page=9": (404, "past the end"),
        "/ui/datasets/pub-rich?page=abc": (400, "page must be a whole number"),
        "/ui/datasets/pub-rich?per=0": (400, "per must be a whole number"),
        "/ui?sort=nope": (400, "sort must be one of"),
        f"/ui?page={'9' * 4301}": (400, "page must be a whole number"),
        f"/ui/datasets/pub-rich?page={'9' * 4301}": (400, "page must be a whole number"),
        f"/ui/datasets/pub-rich?per={'9' * 5000}": (400, "per must be a whole number"),
        "/ui/nowhere": (404, "no such page"),
    }
    for path, (status, fragment) in cases.items():
        browser.get(f"{url}{path}")
        error = browser.find_element(_by("ID"), "error")
        assert fragment in error.text and error.get_attribute("data-status") == str(status), path
        assert "Traceback" not in browser.page_source
        code, body = _status(f"{url}{path}", cookie=token)
        assert code == status and b"Traceback" not in body, path
    screenshot(browser, f"error-{ui_server.backend}")


def test_a_slice_that_is_not_parquet_is_said_on_the_page(ui_server: UiServer, browser: Any) -> None:
    _sign_in(browser, ui_server.server.url, ui_server.tokens["carol"])
    browser.get(f"{ui_server.server.url}/ui/datasets/raw-bytes")
    problem = browser.find_element(_by("ID"), "preview-problem").text
    assert problem.startswith("the last records cannot be read") and "Traceback" not in browser.page_source
    assert _sequences(browser) == [1, 0]  # the rest of the page is there


def test_server_page_and_the_root_redirect(ui_server: UiServer, browser: Any) -> None:
    url = ui_server.server.url
    browser.get(url + "/")  # a browser asking for / lands on the web view
    _wait(browser, lambda d: d.current_url.rstrip("/").endswith("/ui"))
    code, body = _status(url + "/", accept="application/json")
    assert code == 401 and b'"code"' in body  # API clients keep the JSON answer
    assert _status(url + "/", accept="text/html,*/*;q=0.8")[0] == 303

    assert _status(f"{url}/ui/server")[0] == 401  # the server page needs a signed-in token too
    token = ui_server.tokens["alice"]
    _sign_in(browser, url, token)
    browser.get(f"{url}/ui/server")
    assert browser.find_element(_by("ID"), "health").text == "ok"
    assert browser.find_element(_by("ID"), "ready").text == "yes"
    expected_store = "S3" if ui_server.backend == "s3" else "embedded (local disk)"
    assert browser.find_element(_by("ID"), "store-kind").text == expected_store
    counters = browser.find_element(_by("ID"), "counters").text
    assert "sessions" in counters and "flow=push, outcome=ok" in counters
    code, _ = _status(f"{url}/ui/server", cookie=token)
    signed_in = urllib.request.Request(f"{url}/ui/server", headers={"Cookie": f"smart_transfer_token={token}"})
    csp = urllib.request.urlopen(signed_in, timeout=PAGE_LOAD_SECONDS).headers["Content-Security-Policy"]
    assert code == 200 and "script-src 'self'" in csp and "unsafe-inline" not in csp
    screenshot(browser, f"server-{ui_server.backend}")


def test_a_revoked_tokens_cookie_stops_working(ui_server: UiServer, browser: Any) -> None:
    url = ui_server.server.url
    _sign_in(browser, url, ui_server.tokens["carol"])
    assert _listed(browser) == ui_server.readable["carol"]
    assert revoke_tokens(ui_server.tokens_file, "carol") == 1

    def signed_out(driver: Any) -> bool:
        driver.get(f"{url}/ui")
        return bool(driver.find_elements(_by("ID"), "signed-out"))

    _wait(browser, signed_out)  # the server re-reads the tokens file on the next request
    assert _listed(browser) == []
    assert browser.get_cookie("smart_transfer_token") is None  # and the dead cookie is deleted


def test_cross_site_sign_in_is_refused(ui_server: UiServer) -> None:
    request = urllib.request.Request(
        f"{ui_server.server.url}/ui/signin",
        data=f"token={ui_server.tokens['alice']}".encode(),
        headers={"Origin": "http://evil.example", "Content-Type": "application/x-www-form-urlencoded"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=PAGE_LOAD_SECONDS)
    assert refused.value.code == 403 and "Set-Cookie" not in refused.value.headers
