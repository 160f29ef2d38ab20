"""The Simple Transfer Protocol's REST routes and client, on both backends."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import orjson
import pytest

from smart_transfer.model import MetadataBlock, Multihash, SetInfo
from smart_transfer.model.block import utc_now
from tests.conftest import ServerProcess, backend_args, make_files, run_cli


def published(server: ServerProcess, name: str, tmp_path: Path, count: int = 3, size: int = 5000) -> list[dict]:
    """Push a fresh dataset and return its log (newest first)."""
    ws = tmp_path / f"pub-{name}"
    assert (
        run_cli("add", name, *map(str, make_files(tmp_path / f"in-{name}", count, size)), workspace=ws).returncode == 0
    )
    result = run_cli("push", name, f"{server.url}/{name}", workspace=ws)
    assert result.returncode == 0, result.stderr
    log = run_cli("log", name, "--json", workspace=ws)
    return [orjson.loads(line) for line in log.stdout.splitlines()]


def test_head_and_blocks(smart_server: ServerProcess, dataset_name: str, tmp_path: Path) -> None:
    log = published(smart_server, dataset_name, tmp_path)
    head = httpx.get(f"{smart_server.url}/{dataset_name}/refs/head")
    assert head.status_code == 200
    assert head.text == log[0]["hash"]
    assert head.headers["etag"] == f'"{log[0]["hash"]}"'
    assert httpx.head(f"{smart_server.url}/{dataset_name}/refs/head").status_code == 200
    for entry in log:
        block = httpx.get(f"{smart_server.url}/{dataset_name}/blocks/{entry['hash']}")
        assert block.status_code == 200
        assert Multihash.parse(str(entry["hash"])).matches(block.content)
    unknown = "f1220" + "00" * 32
    assert httpx.get(f"{smart_server.url}/{dataset_name}/blocks/{unknown}").status_code == 404
    bad = httpx.get(f"{smart_server.url}/{dataset_name}/blocks/f1220nothex")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "InvalidHash"
    info = httpx.get(f"{smart_server.url}/{dataset_name}").json()
    assert (info["head"], info["blocks"], info["records"]) == (log[0]["hash"], 4, 3)
    assert info["data"] == {"count": 3, "bytes": 15000}
    assert dataset_name in httpx.get(f"{smart_server.url}/").json()["datasets"]


@pytest.mark.parametrize(
    "path",
    [
        "/no-such-dataset/refs/head",
        "/no-such-dataset",
        "/a..b/refs/head",
        "/%2e%2e/refs/head",
        "/a%00b/refs/head",
        "/x/nope/f1220" + "00" * 32,
    ],
)
def test_unknown_or_malformed_names_are_404_or_400(smart_server: ServerProcess, path: str) -> None:
    response = httpx.get(smart_server.url + path)
    assert response.status_code in (400, 404), (path, response.status_code)
    assert response.json()["error"]["code"] in ("DatasetNotFound", "InvalidDatasetName", "NoSuchRoute")


def test_unknown_routes_and_methods_answer_in_the_documented_shape(smart_server: ServerProcess) -> None:
    unknown = httpx.get(smart_server.url + "/a/b/c/d")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "NoSuchRoute"
    wrong = httpx.delete(smart_server.url + "/x/refs/head")
    assert wrong.status_code == 405 and wrong.json()["error"]["code"] == "MethodNotAllowed"
    allowed = {m.strip() for m in wrong.headers["allow"].split(",")}
    assert allowed == {"GET", "HEAD", "PUT"} == set(wrong.json()["error"]["details"]["allowed"])


def test_the_server_description_does_not_expose_where_data_is_stored(smart_server: ServerProcess) -> None:
    info = httpx.get(smart_server.url + "/").json()
    assert info["store"] in ("embedded", "s3")
    text = httpx.get(smart_server.url + "/").text
    assert str(smart_server.root) not in text and "bucket" not in text and "srv-" not in text


def test_the_reserved_store_route_is_never_a_dataset(smart_server: ServerProcess) -> None:
    response = httpx.get(f"{smart_server.url}/_store/refs/head")
    if smart_server.backend == "local":
        assert response.status_code == 403  # the embedded store's presigned route: unsigned -> refused
    else:
        assert response.status_code == 400 and response.json()["error"]["code"] == "InvalidDatasetName"


def test_objects_redirect_stream_range_and_cache(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    log = published(smart_server, dataset_name, tmp_path, count=1, size=10_000)
    digest = str(log[0]["new_data"]["physical_hash"])  # type: ignore[index]
    url = f"{smart_server.url}/{dataset_name}/data/{digest}"
    plain = httpx.get(url, follow_redirects=False)
    if smart_server.backend == "s3":
        assert plain.status_code == 307
        location = plain.headers["location"]
        assert urlsplit(location).netloc != urlsplit(smart_server.url).netloc  # bytes come from S3
        assert Multihash.parse(digest).matches(httpx.get(location).content)
    else:
        assert plain.status_code == 200
    streamed = httpx.get(url + "?redirect=false")
    assert streamed.status_code == 200
    assert streamed.headers["content-length"] == "10000"
    assert streamed.headers["etag"] == f'"{digest}"'
    assert Multihash.parse(digest).matches(streamed.content)
    ranged = httpx.get(url + "?redirect=false", headers={"Range": "bytes=100-199"})
    assert ranged.status_code == 206
    assert ranged.headers["content-range"] == "bytes 100-199/10000"
    assert ranged.content == streamed.content[100:200]
    suffix = httpx.get(url + "?redirect=false", headers={"Range": "bytes=-10"})
    assert suffix.status_code == 206 and suffix.content == streamed.content[-10:]
    beyond = httpx.get(url + "?redirect=false", headers={"Range": "bytes=20000-"})
    assert beyond.status_code == 416 and beyond.headers["content-range"] == "bytes */10000"
    cached = httpx.get(url + "?redirect=false", headers={"If-None-Match": f'"{digest}"'})
    assert cached.status_code == 304
    head = httpx.head(url + "?redirect=false")
    assert head.status_code == 200 and head.headers["content-length"] == "10000" and head.content == b""
    missing = f"{smart_server.url}/{dataset_name}/data/f1220{'11' * 32}"
    assert httpx.get(missing).status_code == 404
    assert httpx.get(f"{smart_server.url}/{dataset_name}/data/f12").status_code == 400
    assert httpx.get(f"{smart_server.url}/{dataset_name}/checkpoints/{digest}").status_code == 404


def test_puts_check_hashes_and_change_nothing_when_wrong(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    base = f"{smart_server.url}/{dataset_name}"
    body = b"some bytes" * 100
    right = "f1220" + hashlib.sha256(body).hexdigest()
    wrong = "f1220" + hashlib.sha256(b"other").hexdigest()
    refused = httpx.put(f"{base}/data/{wrong}", content=body)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "HashMismatch"
    stored = httpx.put(f"{base}/data/{right}", content=body)
    # staged: stored, but not readable until a committed block references it (202 says so)
    assert stored.status_code == 202
    assert stored.json() == {"hash": right, "size": 1000, "created": True, "visible": False}
    again = httpx.put(f"{base}/data/{right}", content=body)
    assert again.status_code == 200 and again.json()["created"] is False
    assert httpx.put(f"{base}/blocks/{right}", content=body).json()["error"]["code"] == "InvalidBlocks"
    assert httpx.put(f"{base}/blocks/{wrong}", content=body).json()["error"]["code"] == "HashMismatch"
    # an object that no committed block references is not served
    assert httpx.get(f"{base}/data/{right}?redirect=false").status_code == 404


def test_head_moves_only_by_if_match_to_a_complete_valid_chain(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    log = published(smart_server, dataset_name, tmp_path, count=1)
    base = f"{smart_server.url}/{dataset_name}"
    old = str(log[0]["hash"])

    def block(label: str) -> tuple[str, bytes]:
        item = MetadataBlock(2, Multihash.parse(old), utc_now(), SetInfo(label))
        return str(item.hash()), item.encode()

    first, first_bytes = block("first")
    second, second_bytes = block("second")
    assert httpx.put(f"{base}/refs/head", content=first).status_code == 428
    missing = httpx.put(f"{base}/refs/head", content=first, headers={"If-Match": f'"{old}"'})
    assert missing.status_code == 400 and missing.json()["error"]["code"] == "InvalidBlocks"
    assert "not uploaded" in missing.json()["error"]["message"]
    for digest, data in ((first, first_bytes), (second, second_bytes)):
        assert httpx.put(f"{base}/blocks/{digest}", content=data).status_code == 201
    results: dict[str, int] = {}
    barrier = threading.Barrier(2)

    def move(new: str) -> None:
        barrier.wait()
        results[new] = httpx.put(f"{base}/refs/head", content=new, headers={"If-Match": f'"{old}"'}).status_code

    threads = [threading.Thread(target=move, args=(h,)) for h in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results.values()) == [200, 412]
    winner = next(h for h, code in results.items() if code == 200)
    assert httpx.get(f"{base}/refs/head").text == winner
    stale = httpx.put(f"{base}/refs/head", content=first, headers={"If-Match": f'"{old}"'})
    assert stale.status_code == 412
    # a block that is valid on its own but does not extend the head
    loser = second if winner == first else first
    diverged = httpx.put(f"{base}/refs/head", content=loser, headers={"If-Match": f'"{winner}"'})
    assert diverged.status_code == 409
    assert httpx.get(f"{base}/refs/head").text == winner


def test_simple_pull_and_push_between_two_workspaces(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    url = f"{smart_server.url}/{dataset_name}"
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "in", 4, 3000)), workspace=a)
    pushed = orjson.loads(run_cli("push", dataset_name, url, "--protocol", "simple", "--json", workspace=a).stdout)
    assert (pushed["protocol"], pushed["blocks"], pushed["objects_transferred"]) == ("simple", 5, 4)
    pulled = orjson.loads(run_cli("pull", url, "--protocol", "simple", "--json", workspace=b).stdout)
    assert (pulled["protocol"], pulled["blocks"], pulled["objects_transferred"]) == ("simple", 5, 4)
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "more", 1, 10, "m")), workspace=b)
    again = orjson.loads(run_cli("push", dataset_name, url, "--protocol", "simple", "--json", workspace=b).stdout)
    assert (again["blocks"], again["objects_transferred"]) == (1, 1)
    back = orjson.loads(run_cli("pull", url, "--protocol", "simple", "--json", workspace=a).stdout)
    assert (back["blocks"], back["objects_transferred"]) == (1, 1)
    logs = [run_cli("log", dataset_name, "--json", workspace=w).stdout for w in (a, b)]
    assert logs[0] == logs[1]
    # smart and simple interoperate on the same dataset
    smart = orjson.loads(run_cli("pull", url, "--json", workspace=tmp_path / "c").stdout)
    assert smart["new_head"] == back["new_head"]


def test_unreachable_storage_falls_back_to_the_simple_protocol(
    request: pytest.FixtureRequest, server_factory: object, dataset_name: str, tmp_path: Path
) -> None:
    s3 = request.getfixturevalue("s3_env")
    # presigned URLs name a host nobody listens on: direct transfers fail, the server still works
    server: ServerProcess = server_factory(  # type: ignore[operator]
        *backend_args("s3", s3), "--s3-public-endpoint", "http://127.0.0.1:9"
    )
    url = f"{server.url}/{dataset_name}"
    a, b = tmp_path / "a", tmp_path / "b"
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "in", 3, 2000)), workspace=a)
    strict = run_cli("push", dataset_name, url, "--no-fallback", workspace=a)
    assert strict.returncode == 1 and "storage unreachable" in strict.stderr
    pushed = run_cli("push", dataset_name, url, "--json", workspace=a)
    assert pushed.returncode == 0, pushed.stderr
    assert "falling back to the simple protocol" in pushed.stderr
    assert orjson.loads(pushed.stdout)["protocol"] == "simple"
    pulled = run_cli("pull", url, "--json", workspace=b)
    assert pulled.returncode == 0, pulled.stderr
    assert "falling back" in pulled.stderr
    summary = orjson.loads(pulled.stdout)
    assert (summary["protocol"], summary["objects_transferred"]) == ("simple", 3)
    assert (
        run_cli("log", dataset_name, "--json", workspace=a).stdout
        == run_cli("log", dataset_name, "--json", workspace=b).stdout
    )
