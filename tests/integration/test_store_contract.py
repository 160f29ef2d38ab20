"""One contract, two stores: LocalStore (presigned URLs served by a real server process) and S3Store
(the real local Ceph S3 server). Every test runs against both."""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
import pytest

from smart_transfer.storage import (
    InvalidKey,
    MultipartRefused,
    NoSuchUpload,
    ObjectNotFound,
    ObjectStore,
    PresignedRequest,
)
from smart_transfer.storage.digest import md5_base64, multipart_etag
from smart_transfer.storage.local import LocalStore
from smart_transfer.storage.parts import MIB
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


def test_children_come_in_key_order_from_a_start(store: ObjectStore, ns: str) -> None:
    for name in ["b/x", "a/x", "a-b/x", "a0/x", "c/x"]:
        store.put(f"{ns}/{name}", b"1")
    # by ``child + "/"``, as S3 lists common prefixes: a-b/ < a/ < a0/
    assert list(store.list_children(f"{ns}/")) == ["a-b", "a", "a0", "b", "c"]
    assert list(store.list_children(f"{ns}/", "a")) == ["a0", "b", "c"]  # nothing under a/ again
    assert list(store.list_children(f"{ns}/", "a-b")) == ["a", "a0", "b", "c"]
    assert list(store.list_children(f"{ns}/", "c")) == []


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


# -- multipart uploads and ranges: S3's flow, which the embedded store implements too ----------------

PART_ONE = bytes(range(256)) * (5 * MIB // 256)  # S3's smallest part that is not the last one
PART_TWO = b"the last part may be small"


def _md5_hex(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def _put_part(store: ObjectStore, key: str, upload_id: str, number: int, body: bytes) -> httpx.Response:
    request = store.presign_upload_part(key, upload_id, number, md5_base64(body), 60)
    assert request.headers == {"Content-MD5": md5_base64(body)}
    return send(request, body)


def test_a_multipart_upload_through_presigned_parts(store: ObjectStore, ns: str) -> None:
    key = f"{ns}/data/large"
    upload_id = store.create_multipart(key)
    assert [(u.key, u.upload_id) for u in store.list_multipart(f"{ns}/")] == [(key, upload_id)]
    assert _put_part(store, key, upload_id, 2, PART_TWO).status_code == 200
    response = _put_part(store, key, upload_id, 1, PART_ONE)
    assert response.status_code == 200 and response.headers["etag"].strip('"') == _md5_hex(PART_ONE)
    held = store.list_parts(key, upload_id)
    assert [(p.number, p.size, p.etag) for p in held] == [
        (1, len(PART_ONE), _md5_hex(PART_ONE)),
        (2, len(PART_TWO), _md5_hex(PART_TWO)),
    ]
    assert not store.exists(key)  # nothing is visible before the upload completes
    info = store.complete_multipart(key, upload_id, [(1, _md5_hex(PART_ONE)), (2, _md5_hex(PART_TWO))])
    assert info.size == len(PART_ONE) + len(PART_TWO)
    assert info.etag == store.head(key).etag == multipart_etag([_md5_hex(PART_ONE), _md5_hex(PART_TWO)])  # type: ignore[union-attr]
    assert store.get(key) == PART_ONE + PART_TWO
    assert list(store.list_multipart(f"{ns}/")) == []
    with pytest.raises(NoSuchUpload):
        store.list_parts(key, upload_id)


def test_a_part_with_another_body_or_number_is_refused(store: ObjectStore, ns: str) -> None:
    key = f"{ns}/data/wrong"
    upload_id = store.create_multipart(key)
    request = store.presign_upload_part(key, upload_id, 1, md5_base64(PART_TWO), 60)
    assert send(request, b"not the promised part").status_code in (400, 403)
    parts = parse_qsl(urlsplit(request.url).query)
    renumbered = [(k, "2" if k in ("partNumber", "part") else v) for k, v in parts]
    url = urlunsplit(urlsplit(request.url)._replace(query=urlencode(renumbered)))
    assert httpx.put(url, content=PART_TWO, headers=request.headers, timeout=30).status_code == 403
    assert store.list_parts(key, upload_id) == []
    store.abort_multipart(key, upload_id)


def test_completion_refuses_missing_wrong_or_small_parts(store: ObjectStore, ns: str) -> None:
    key = f"{ns}/data/incomplete"
    upload_id = store.create_multipart(key)
    assert _put_part(store, key, upload_id, 1, PART_TWO).status_code == 200
    assert _put_part(store, key, upload_id, 2, PART_TWO).status_code == 200
    for parts in (
        [(1, _md5_hex(PART_TWO)), (3, _md5_hex(PART_TWO))],  # part 3 was never sent
        [(1, _md5_hex(PART_ONE)), (2, _md5_hex(PART_TWO))],  # part 1 holds other bytes
        [(1, _md5_hex(PART_TWO)), (2, _md5_hex(PART_TWO))],  # part 1 is under 5 MiB
    ):
        with pytest.raises(MultipartRefused):
            store.complete_multipart(key, upload_id, parts)
        assert not store.exists(key)
    store.abort_multipart(key, upload_id)


def test_an_aborted_upload_is_gone(store: ObjectStore, ns: str) -> None:
    key = f"{ns}/data/aborted"
    upload_id = store.create_multipart(key)
    request = store.presign_upload_part(key, upload_id, 1, md5_base64(PART_TWO), 60)
    store.abort_multipart(key, upload_id)
    store.abort_multipart(key, upload_id)  # twice: not an error
    assert list(store.list_multipart(f"{ns}/")) == []
    with pytest.raises(NoSuchUpload):
        store.list_parts(key, upload_id)
    assert send(request, PART_TWO).status_code == 404
    with pytest.raises(NoSuchUpload):
        store.complete_multipart(key, upload_id, [(1, _md5_hex(PART_TWO))])


def test_presigned_gets_answer_ranges(store: ObjectStore, ns: str) -> None:
    body = os.urandom(100_000)
    store.put(f"{ns}/r", body)
    get = store.presign_get(f"{ns}/r", 60)
    response = send(get, headers={"Range": "bytes=1000-1999"})
    assert response.status_code == 206
    assert response.headers["content-range"] == f"bytes 1000-1999/{len(body)}"
    assert response.content == body[1000:2000]


def test_a_file_above_the_threshold_is_stored_in_parts(store: ObjectStore, ns: str, tmp_path: Path) -> None:
    path = tmp_path / "large"
    path.write_bytes(PART_ONE + PART_ONE + PART_TWO)
    if isinstance(store, S3Store):
        store.multipart_threshold, store.part_size = 5 * MIB, 5 * MIB
    info = store.put_file(f"{ns}/f", path)
    assert info.size == path.stat().st_size
    assert store.get(f"{ns}/f") == path.read_bytes()
    expected = (
        multipart_etag([_md5_hex(PART_ONE), _md5_hex(PART_ONE), _md5_hex(PART_TWO)])
        if isinstance(store, S3Store)
        else _md5_hex(path.read_bytes())
    )
    assert info.etag == store.head(f"{ns}/f").etag == expected  # type: ignore[union-attr]


def test_s3_reads_a_reference_record_once_and_never_serves_a_rewritten_one(s3_env: S3Env, ns: str) -> None:
    """S3Store keeps generation records it read (they are written once): a second read of an unchanged
    reference is one LIST and no GET. A record deleted and written again under the same key (a dataset
    removed and made anew starts at generation 1 again) is read afresh, never served from memory."""
    s3 = S3Store(s3_env.bucket, f"records-{secrets.token_hex(6)}", endpoint_url=s3_env.endpoint)
    calls: list[str] = []
    s3.observe(lambda operation, seconds, ok: calls.append(operation))
    ref = f"{ns}/refs/head"
    try:
        assert s3.compare_and_swap(ref, None, b"first")
        calls.clear()
        assert s3.read_ref(ref) == b"first"
        assert s3.read_ref(ref) == b"first"
        assert calls.count("GetObject") <= 1 and len(calls) <= 3  # two LISTs, at most one GET
        for info in list(s3.list(f"{ns}/refs/")):
            s3.delete(info.key)
        assert s3.read_ref(ref) is None
        assert s3.compare_and_swap(ref, None, b"other value")  # generation 1's key again, new bytes
        assert s3.read_ref(ref) == b"other value"
    finally:
        s3.close()
