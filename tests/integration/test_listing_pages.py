"""Every dataset listing pages the same way (server/listing.py): ``GET /``, the web view's list, Delta
Sharing's tables and the SDK's ``dataset_pages`` (which ``ls`` follows). 25 datasets, pages of 10: the
pages join to the whole list exactly, a token reading a subset gets exactly it, a folder without a head
(a first push under way) is never listed, and a page token the server did not give is one clear 400."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import delta_sharing
import httpx
import orjson
import pytest

from smart_transfer.client.client import Client
from smart_transfer.client.inspection.status import FIRST_PAGE_DATASETS
from smart_transfer.model import DataField, SetDataSchema
from smart_transfer.repo import Repository
from smart_transfer.server.settings import ServerSettings
from tests.conftest import ServerProcess, backend_args, start_server
from tests.integration.test_security import token

NAMES = [f"ds-{i:02d}" for i in range(25)]
SUBSET = [name for name in NAMES if name.startswith("ds-1")]  # ds-10 .. ds-19
ALL_TABLES = "/delta-sharing/shares/smart-transfer/all-tables"


@dataclass
class Listed:
    server: ServerProcess
    everything: str  # a token reading every dataset
    some: str  # a token reading SUBSET


@pytest.fixture(scope="module", params=["local", "s3"])
def listed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listed]:
    """25 datasets (a Seed and a schema each, committed through the repository as a push ends) and a
    folder holding an object but no head, on one server per store."""
    s3 = request.getfixturevalue("s3_env") if request.param == "s3" else None
    root = tmp_path_factory.mktemp(f"listing-{request.param}")
    extra = backend_args(request.param, s3)
    options = dict(zip(("s3_endpoint", "s3_bucket", "s3_prefix"), extra[1::2], strict=True)) if extra else {}
    settings = ServerSettings(root=root / "server", **options)
    store = settings.open_store(1)
    with Repository(store, settings.index_path(store)) as repository:
        schema = [SetDataSchema((DataField("offset", "BIGINT", False),))]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda name: repository.dataset(name).append(schema), NAMES))
        store.put("ds-15a/objects/x", b"half pushed")  # no head: not a dataset yet
    tokens = root / "tokens.json"
    everything, some = token(tokens, "all", "--read", "*"), token(tokens, "some", "--read", "ds-1*")
    server = start_server(root / "server", "--tokens", str(tokens), *extra)
    yield Listed(server, everything, some)
    server.stop()


def _rest_pages(url: str, secret: str, limit: int) -> list[list[str]]:
    pages, page_token = [], None
    with httpx.Client(headers={"Authorization": f"Bearer {secret}"}, timeout=30) as http:
        while True:
            params = {"limit": limit, **({"page_token": page_token} if page_token else {})}
            body = http.get(f"{url}/", params=params).json()
            pages.append(body["datasets"])
            page_token = body["next_page_token"]
            if page_token is None:
                return pages


def test_rest_pages_join_to_exactly_what_the_token_reads(listed: Listed) -> None:
    pages = _rest_pages(listed.server.url, listed.everything, 10)
    assert [len(page) for page in pages] == [10, 10, 5]
    assert [name for page in pages for name in page] == NAMES  # in order, no duplicates, no ds-15a
    some = [name for page in _rest_pages(listed.server.url, listed.some, 4) for name in page]
    assert some == SUBSET


def test_sharing_pages_and_its_own_client_list_the_same(listed: Listed, tmp_path: Path) -> None:
    url = listed.server.url
    for secret, expected in ((listed.everything, NAMES), (listed.some, SUBSET)):
        names, page_token = [], ""
        with httpx.Client(headers={"Authorization": f"Bearer {secret}"}, timeout=30) as http:
            while True:
                params = {"maxResults": 10, **({"pageToken": page_token} if page_token else {})}
                body = http.get(f"{url}{ALL_TABLES}", params=params).json()
                names += [item["name"] for item in body["items"]]
                page_token = body.get("nextPageToken", "")
                if not page_token:
                    break
        assert names == expected
        profile = tmp_path / "p.share"
        endpoint = f"{url}/delta-sharing"
        profile.write_bytes(orjson.dumps({"shareCredentialsVersion": 1, "endpoint": endpoint, "bearerToken": secret}))
        tables = delta_sharing.SharingClient(str(profile)).list_all_tables()
        assert [table.name for table in tables] == expected


def _ui_pages(url: str, secret: str) -> list[list[str]]:
    pages, link = [], f"{url}/ui?per=10"
    with httpx.Client(cookies={"smart_transfer_token": secret}, timeout=30) as http:
        while True:
            page = http.get(link).text
            pages.append(re.findall(r'class="dataset" href="/ui/datasets/([^"]+)"', page))
            following = re.search(r'id="next-page" href="([^"]+)"', page)
            if following is None:
                return pages
            link = url + following.group(1).replace("&amp;", "&")


def test_web_view_pages_follow_the_same_listing(listed: Listed) -> None:
    pages = _ui_pages(listed.server.url, listed.everything)
    assert [name for page in pages for name in page] == NAMES and len(pages) == 3
    assert [name for page in _ui_pages(listed.server.url, listed.some) for name in page] == SUBSET


def test_the_sdk_follows_every_page(listed: Listed) -> None:
    async def pages(secret: str, size: int | None = 10) -> list[list[Any]]:
        client = Client(None, token=secret)
        return [page async for page in client.dataset_pages(listed.server.url, page_size=size)]

    found = asyncio.run(pages(listed.everything))
    assert [len(page) for page in found] == [10, 10, 5]
    # no size asked (what `ls` does): a short first page, so the first rows print sooner, then the default
    unsized = asyncio.run(pages(listed.everything, None))
    assert [len(page) for page in unsized] == [FIRST_PAGE_DATASETS, len(NAMES) - FIRST_PAGE_DATASETS]
    assert [info.name for page in unsized for info in page] == NAMES
    assert [info.name for page in found for info in page] == NAMES
    assert all(info.blocks == 2 for page in found for info in page)  # described: Seed and schema
    assert [info.name for info in asyncio.run(Client(None, token=listed.some).list_datasets(listed.server.url))] == (
        SUBSET
    )


def test_a_page_token_the_server_did_not_give_is_one_clear_400(listed: Listed) -> None:
    url = listed.server.url
    bad = ["garbage!", "c3QxOnNoYXJlczp4", "c3QxOmFmdGVyOmEuLmI="]  # not base64; another listing's; a bad name
    with httpx.Client(headers={"Authorization": f"Bearer {listed.everything}"}, timeout=30) as http:
        for text in bad:
            error = http.get(f"{url}/", params={"page_token": text})
            assert error.status_code == 400 and error.json()["error"]["code"] == "InvalidRequest", error.text
            assert error.json()["error"]["message"] == "the page token is not one this server gave"
            sharing = http.get(f"{url}{ALL_TABLES}", params={"pageToken": text})
            assert sharing.status_code == 400 and sharing.json()["errorCode"] == "INVALID_PARAMETER_VALUE"
        for size in (0, 1001, "x"):
            assert http.get(f"{url}/", params={"limit": size}).status_code == 400
    page = httpx.get(f"{url}/ui", params={"page_token": bad[0]}, cookies={"smart_transfer_token": listed.everything})
    assert page.status_code == 400 and "the page token is not one this server gave" in page.text
