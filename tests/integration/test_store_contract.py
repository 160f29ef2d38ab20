"""One contract, two stores: LocalStore (presigned URLs served by a real server process) and S3Store
(the real local Ceph S3 server). Every test runs against both."""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
import pytest

from smart_transfer.storage import InvalidKey, ObjectNotFound, ObjectStore, PresignedRequest
from smart_transfer.storage.digest import md5_base64
from smart_transfer.storage.local import LocalStore
from smart_transfer.storage.s3 import S3Store
from tests.conftest import S3Env, ServerProcess


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest) -> Iterator[ObjectStore]:
    if request.param == "local":
        server: ServerProcess = request.getfixturevalue("local_server")
        local = LocalStore(server.root / "store", public_url=server.url)
        yield local
        local.close()
    else:
        s3_env: S3Env = request.getfixturevalue("s3_env")
        s3 = S3Store(s3_env.bucket, f"contract-{secrets.token_hex(6)}", endpoint_url=s3_env.endpoint)
        yield s3
        s3.close()


@pytest.fixture
def ns() -> str:
    """A fresh key namespace per test (the local server's root is shared by the session)."""
    return f"ns{secrets.token_hex(6)}"


def send(
    request: PresignedRequest,
    body: bytes | None = None,
    method: str | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    return httpx.request(
        method or request.method, request.url, content=body, headers={**request.headers, **(headers or {})}, timeout=30
    )


def test_put_get_head_delete_round_trip(store: ObjectStore, ns: str) -> None:
    key = f"{ns}/data/object"
    info = store.put(key, b"hello world")
    assert info.size == 11
    assert info.etag == hashlib.md5(b"hello world").hexdigest()
    assert store.get(key) == b"hello world"
    head = store.head(key)
    assert head is not None
    assert (head.size, head.etag) == (11, info.etag)
    assert store.exists(key)
    store.delete(key)
    assert not store.exists(key)
    assert store.head(key) is None
    store.delete(key)  # deleting twice is fine


def test_missing_objects_raise_not_found(store: ObjectStore, ns: str) -> None:
    with pytest.raises(ObjectNotFound):
        store.get(f"{ns}/missing")
    with pytest.raises(ObjectNotFound):
        list(store.stream(f"{ns}/missing"))


def test_stream_returns_ranges(store: ObjectStore, ns: str) -> None:
    data = bytes(range(256)) * 20
    store.put(f"{ns}/r", data)
    assert b"".join(store.stream(f"{ns}/r")) == data
    assert b"".join(store.stream(f"{ns}/r", 10, 19)) == data[10:20]
    assert b"".join(store.stream(f"{ns}/r", 5000)) == data[5000:]


def test_put_file(store: ObjectStore, ns: str, tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100_000)
    info = store.put_file(f"{ns}/f", path)
    assert info.size == 100_000
    assert info.etag == hashlib.md5(b"x" * 100_000).hexdigest()
    assert store.get(f"{ns}/f") == b"x" * 100_000


def test_list_by_prefix_in_key_order(store: ObjectStore, ns: str) -> None:
    for name in ["b", "a", "c/d", "c/e"]:
        store.put(f"{ns}/{name}", name.encode())
    store.put(f"{ns}x/other", b"not mine")
    listed = [(i.key, i.size) for i in store.list(f"{ns}/")]
    assert listed == [(f"{ns}/a", 1), (f"{ns}/b", 1), (f"{ns}/c/d", 3), (f"{ns}/c/e", 3)]
    assert [i.key for i in store.list(f"{ns}/c/")] == [f"{ns}/c/d", f"{ns}/c/e"]
    assert sorted(store.list_children(f"{ns}/")) == ["a", "b", "c"]
    assert list(store.list(f"{ns}/nothing/")) == []


def test_create_if_absent_creates_once(store: ObjectStore, ns: str) -> None:
    assert store.create_if_absent(f"{ns}/once", b"first")
    assert not store.create_if_absent(f"{ns}/once", b"second")
    assert store.get(f"{ns}/once") == b"first"


def test_compare_and_swap_moves_only_from_the_expected_value(store: ObjectStore, ns: str) -> None:
    ref = f"{ns}/refs/head"
    assert store.read_ref(ref) is None
    assert not store.compare_and_swap(ref, b"v0", b"v1")
    assert store.compare_and_swap(ref, None, b"v1")
    assert not store.compare_and_swap(ref, None, b"v2")
    assert not store.compare_and_swap(ref, b"v0", b"v2")
    assert store.read_ref(ref) == b"v1"
    assert store.compare_and_swap(ref, b"v1", b"v2")
    assert store.compare_and_swap(ref, b"v2", b"v3")
    assert store.compare_and_swap(ref, b"v3", b"v1")  # back to an earlier value is fine
    assert store.read_ref(ref) == b"v1"


def test_racing_compare_and_swaps_have_exactly_one_winner(store: ObjectStore, ns: str) -> None:
    ref = f"{ns}/refs/head"
    assert store.compare_and_swap(ref, None, b"base")
    for round_number in range(3):
        expected = store.read_ref(ref)
        wins: list[bytes] = []
        barrier = threading.Barrier(8)

        def attempt(
            i: int,
            expected: bytes | None = expected,
            round_number: int = round_number,
            barrier: threading.Barrier = barrier,
            wins: list[bytes] = wins,
        ) -> None:
            value = f"r{round_number}-w{i}".encode()
            barrier.wait()
            if store.compare_and_swap(ref, expected, value):
                wins.append(value)

        threads = [threading.Thread(target=attempt, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(wins) == 1
        assert store.read_ref(ref) == wins[0]


@pytest.mark.parametrize(
    "key", ["../escape", "/abs", "a//b", ".hidden/x", "a/../b", "a/./b", "", "a/b/", "a\0b", "a\\b", "%2e%2e/x"]
)
def test_keys_that_could_escape_are_refused(store: ObjectStore, key: str) -> None:
    with pytest.raises(InvalidKey):
        store.put(key, b"x")
    with pytest.raises(InvalidKey):
        store.get(key)


def test_presigned_get_and_put_work_without_credentials(store: ObjectStore, ns: str) -> None:
    body = b"payload" * 1000
    put = store.presign_put(f"{ns}/p", 60, content_md5=md5_base64(body))
    assert put.headers == {"Content-MD5": md5_base64(body)}
    assert put.expires_at > time.time() + 50
    response = send(put, body)
    assert response.status_code == 200, response.text
    assert response.headers["etag"].strip('"') == hashlib.md5(body).hexdigest()
    get = store.presign_get(f"{ns}/p", 60)
    response = send(get)
    assert response.status_code == 200
    assert response.content == body


def test_expired_url_is_refused(store: ObjectStore, ns: str) -> None:
    store.put(f"{ns}/e", b"data")
    get = store.presign_get(f"{ns}/e", 1)
    put = store.presign_put(f"{ns}/e2", 1)
    time.sleep(2.2)
    assert send(get).status_code == 403
    assert send(put, b"late").status_code == 403
    assert not store.exists(f"{ns}/e2")


def test_get_url_cannot_put_or_delete(store: ObjectStore, ns: str) -> None:
    store.put(f"{ns}/g", b"original")
    get = store.presign_get(f"{ns}/g", 60)
    assert send(get, b"overwrite", method="PUT").status_code == 403
    assert send(get, method="DELETE").status_code in (403, 405)
    assert store.get(f"{ns}/g") == b"original"


def _tamper(url: str, change: str) -> str:
    parts = urlsplit(url)
    query = parse_qsl(parts.query)
    if change == "signature":
        query = [(k, (v[:-1] + ("0" if v[-1] != "0" else "1")) if "ignature" in k else v) for k, v in query]
        return urlunsplit(parts._replace(query=urlencode(query)))
    if change == "expiry":
        query = [(k, str(int(v) + 3600) if k.lower() in ("expires", "x-amz-expires") else v) for k, v in query]
        return urlunsplit(parts._replace(query=urlencode(query)))
    return urlunsplit(parts._replace(path=parts.path.rsplit("/", 1)[0] + "/other"))


@pytest.mark.parametrize("change", ["signature", "expiry", "key"])
def test_tampered_url_is_refused(store: ObjectStore, ns: str, change: str) -> None:
    store.put(f"{ns}/t", b"secret")
    store.put(f"{ns}/other", b"other secret")
    get = store.presign_get(f"{ns}/t", 60)
    response = httpx.get(_tamper(get.url, change), timeout=30)
    assert response.status_code == 403
    put = store.presign_put(f"{ns}/t", 60)
    response = httpx.put(_tamper(put.url, change), content=b"evil", timeout=30)
    assert response.status_code == 403
    assert store.get(f"{ns}/t") == b"secret"
    assert store.get(f"{ns}/other") == b"other secret"


def test_wrong_md5_body_is_refused(store: ObjectStore, ns: str) -> None:
    put = store.presign_put(f"{ns}/m", 60, content_md5=md5_base64(b"the promised body"))
    response = send(put, b"a different body")
    assert response.status_code in (400, 403)
    assert not store.exists(f"{ns}/m")
    # the header is bound into the signature: sending a matching MD5 of another body is refused too
    response = send(put, b"a different body", headers={"Content-MD5": md5_base64(b"a different body")})
    assert response.status_code == 403
    assert not store.exists(f"{ns}/m")


def test_md5_bound_put_without_the_header_is_refused(store: ObjectStore, ns: str) -> None:
    put = store.presign_put(f"{ns}/h", 60, content_md5=md5_base64(b"body"))
    response = httpx.put(put.url, content=b"body", timeout=30)
    assert response.status_code in (400, 403)
    assert not store.exists(f"{ns}/h")
