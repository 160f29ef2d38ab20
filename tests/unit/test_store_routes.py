"""The embedded store's presigned GET and HEAD answer the same bytes and headers whether an object is
answered from memory (small, whole) or from its file (large, or a range), count the bytes sent, and
answer 404 for an object gone since its HEAD."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from smart_transfer.server.store_routes import INLINE_READ_BYTES, store_router
from smart_transfer.storage.local import LocalStore

BASE = "http://testserver"


@pytest.fixture
def served(tmp_path: Path) -> tuple[LocalStore, TestClient, list[int]]:
    store = LocalStore(tmp_path / "store", public_url=BASE)
    counted: list[int] = []
    app = FastAPI()
    app.include_router(store_router(store, 1 << 30, counted.append))
    return store, TestClient(app), counted


def _path(store: LocalStore, key: str) -> str:
    parts = urlsplit(store.presign_get(key).url)
    return f"{parts.path}?{parts.query}"


@pytest.mark.parametrize("size", [0, 4096, INLINE_READ_BYTES, INLINE_READ_BYTES + 1])
def test_a_whole_object_and_its_head_carry_its_bytes_and_headers(
    served: tuple[LocalStore, TestClient, list[int]], size: int
) -> None:
    store, client, counted = served
    data = os.urandom(size)
    store.put("data/obj", data)
    got = client.get(_path(store, "data/obj"))
    assert got.status_code == 200 and got.content == data
    assert got.headers["content-length"] == str(size)
    assert got.headers["etag"] == f'"{hashlib.md5(data).hexdigest()}"'
    assert got.headers["accept-ranges"] == "bytes" and got.headers["last-modified"].endswith("GMT")
    assert got.headers["content-type"] == "application/octet-stream"
    head = client.head(_path(store, "data/obj"))
    assert head.status_code == 200 and head.content == b""
    for name in ("content-length", "etag", "accept-ranges", "last-modified"):
        assert head.headers[name] == got.headers[name], name
    assert counted == [size]  # a GET counts its bytes, a HEAD none


def test_a_range_of_a_small_object_is_a_206_of_those_bytes(served: tuple[LocalStore, TestClient, list[int]]) -> None:
    store, client, counted = served
    data = os.urandom(4096)
    store.put("data/obj", data)
    got = client.get(_path(store, "data/obj"), headers={"Range": "bytes=100-199"})
    assert got.status_code == 206 and got.content == data[100:200]
    assert counted == [100]


def test_an_object_gone_since_its_head_is_a_404(
    served: tuple[LocalStore, TestClient, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, client, _ = served
    store.put("data/obj", b"bytes")
    head = store.head

    def head_then_gc(key: str) -> object:
        info = head(key)
        store.delete(key)  # gc, between the route's HEAD and its read
        return info

    monkeypatch.setattr(store, "head", head_then_gc)
    got = client.get(_path(store, "data/obj"))
    assert got.status_code == 404 and got.json()["error"]["code"] == "NoSuchKey", got.text
