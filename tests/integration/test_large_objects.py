"""Large objects on both stores (the embedded one and the real local Ceph S3): multipart uploads with a
presigned, MD5-bound URL per part, resumed part by part after a kill, wrong parts refused, abandoned
uploads aborted by gc; parallel ranged downloads, resumed range by range after a kill, corrupt ranges
detected. A small part size (5 MiB, S3's smallest) exercises the same path as the 64 MiB default."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import orjson
import pytest

from smart_transfer.client import RemoteError, SyncClient
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.messages import MultipartUpload
from smart_transfer.storage import ObjectStore
from smart_transfer.storage.digest import digest_file, multipart_etag, part_md5s
from smart_transfer.storage.local import LocalStore
from smart_transfer.storage.parts import MIB, layout
from smart_transfer.storage.s3 import S3Store
from smart_transfer.transfer.limits import LargeObjects
from tests.conftest import CLI, ServerProcess, backend_args, empty_s3_prefix, free_port, run_cli, start_server, summary
from tests.integration.test_resume_and_expiry import kill_when, log_of

PART = 5 * MIB
#: The server cuts objects above 6 MiB into 5 MiB parts; the client pulls them in 1 MiB ranges.
SERVER_PARTS = ["--multipart-threshold", "6M", "--part-size", "5M"]
RANGES = ["--range-threshold", "6M", "--range-size", "1M"]
SIZE = 5 * PART + 12_345  # six parts, the last one small


@pytest.fixture(scope="module", params=["local", "s3"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    s3 = request.getfixturevalue("s3_env") if request.param == "s3" else None
    started = start_server(
        tmp_path_factory.mktemp(f"large-{request.param}"), *backend_args(request.param, s3), *SERVER_PARTS
    )
    started.backend = request.param
    yield started
    started.stop()
    if s3 is not None:  # the shared S3 keeps objects in RAM: give back what this module stored
        empty_s3_prefix(s3, _prefix(started))


def _prefix(server: ServerProcess) -> str:
    return next(str(a) for a in server.process.args if str(a).startswith("srv-"))  # type: ignore[union-attr]


@pytest.fixture
def store(server: ServerProcess, request: pytest.FixtureRequest) -> Iterator[ObjectStore]:
    """The server's store, seen from behind the server."""
    if server.backend == "local":
        yield LocalStore(server.root / "store")
        return
    s3_env = request.getfixturevalue("s3_env")
    s3 = S3Store(s3_env.bucket, _prefix(server), endpoint_url=s3_env.endpoint)
    yield s3
    s3.close()


def _gc(server: ServerProcess, request: pytest.FixtureRequest, *args: str) -> dict[str, object]:
    store_args = ["--root", str(server.root)]
    if server.backend == "s3":
        s3 = request.getfixturevalue("s3_env")
        store_args += ["--s3-endpoint", s3.endpoint, "--s3-bucket", s3.bucket, "--s3-prefix", _prefix(server)]
    result = subprocess.run([*CLI, "gc", *store_args, "--json", *args], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return orjson.loads(result.stdout)  # type: ignore[no-any-return]


def _large_file(directory: Path, size: int = SIZE) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"large-{secrets.token_hex(3)}.bin"
    path.write_bytes(os.urandom(size))
    return path


def _parts_held(store: ObjectStore, name: str) -> int:
    """Bytes in the parts the store holds for ``name``'s unfinished uploads."""
    return sum(
        part.size
        for upload in store.list_multipart(f"{name}/")
        for part in store.list_parts(upload.key, upload.upload_id)
    )


def _object_key(name: str, source: Path) -> str:
    return f"{name}/data/{digest_file(source).multihash}"


def _ranges_done(workspace: Path) -> list[int]:
    """The ranges the journal of a staged download records as written."""
    journals = [p for p in _staging(workspace) if p.name.endswith(".ranges")]
    return [int(line) for line in journals[0].read_text().splitlines()[1:]] if journals else []


def _staging(workspace: Path) -> list[Path]:
    return sorted((workspace / "store" / ".store" / "staging").glob("*"))


def test_large_objects_move_in_parts_and_ranges(
    server: ServerProcess, store: ObjectStore, dataset_name: str, tmp_path: Path
) -> None:
    a = tmp_path / "a"
    source = _large_file(tmp_path / "in")
    small = tmp_path / "in" / "small.bin"
    small.write_bytes(os.urandom(1000))
    run_cli("add", dataset_name, str(source), str(small), workspace=a)
    for protocol in ("smart", "simple"):
        name = f"{dataset_name}-{protocol}"
        url = f"{server.url}/{name}"
        pushed = summary(run_cli("push", dataset_name, url, "--json", "--protocol", protocol, workspace=a))
        assert pushed["bytes_transferred"] == SIZE + 1000
        key = _object_key(name, source)
        etag = store.head(key).etag  # type: ignore[union-attr]
        parts = layout(SIZE, PART)
        if protocol == "smart" or server.backend == "s3":  # the embedded store takes a simple PUT whole
            assert etag == multipart_etag(part_md5s(source, parts)) and etag.endswith(f"-{len(parts)}")
        assert list(store.list_multipart(f"{name}/")) == []
        b = tmp_path / f"b-{protocol}"
        pulled = summary(run_cli("pull", url, "--json", "--protocol", protocol, *RANGES, workspace=b))
        assert pulled["bytes_transferred"] == SIZE + 1000
        assert (b / "store" / key).read_bytes() == source.read_bytes()
        assert _staging(b) == []
        assert log_of(b, name) == log_of(a, dataset_name)


def test_a_push_killed_mid_object_resumes_part_by_part(
    server: ServerProcess, store: ObjectStore, dataset_name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    a = tmp_path / "a"
    run_cli("add", dataset_name, str(_large_file(tmp_path / "in")), workspace=a)
    url = f"{server.url}/{dataset_name}"
    slow = ["push", dataset_name, url, "--limit-rate", "4M", "--parallel-parts", "2"]
    assert kill_when(slow, a, lambda: _parts_held(store, dataset_name) >= 2 * PART) == -signal.SIGKILL
    time.sleep(1)  # a part whose last byte was on the wire when the client died may still land
    held = _parts_held(store, dataset_name)
    assert 2 * PART <= held < SIZE
    assert run_cli("pull", url, workspace=tmp_path / "check").returncode != 0  # nothing committed
    resumed = summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    assert resumed["bytes_transferred"] == SIZE - held  # only the parts the store did not hold
    assert list(store.list_multipart(f"{dataset_name}/")) == []
    pulled = summary(run_cli("pull", url, "--json", *RANGES, workspace=tmp_path / "b"))
    assert pulled["new_head"] == resumed["new_head"]


def test_a_wrong_part_is_refused_and_nothing_commits(
    server: ServerProcess, store: ObjectStore, dataset_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx

    # the push flow imports upload_parts where objects move: patch it where it lives
    import smart_transfer.transfer.multipart as push_module

    a = tmp_path / "a"
    run_cli("add", dataset_name, str(_large_file(tmp_path / "in")), workspace=a)
    url = f"{server.url}/{dataset_name}"
    real_upload = push_module.upload_parts
    refused: list[int] = []

    async def tampering(http: object, upload: MultipartUpload, *args: object, **kwargs: object) -> int:
        """Send other bytes for part 2 (the store must refuse them), and the other parts as they are."""
        second = next(p for p in upload.parts if p.part_number == 2)
        answer = httpx.put(second.request.url, content=b"x" * 1000, headers=second.request.headers, timeout=30)
        refused.append(answer.status_code)
        rest = msgspec.structs.replace(upload, parts=[p for p in upload.parts if p.part_number != 2])
        return await real_upload(http, rest, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(push_module, "upload_parts", tampering)
    with SyncClient(a) as client, pytest.raises(RemoteError) as caught:
        client.push(dataset_name, url)
    assert refused and refused[0] in (400, 403)
    assert caught.value.code is ErrorCode.UPLOAD_INVALID
    assert "1 of 6 parts not uploaded (parts 2)" in str(caught.value)
    assert run_cli("pull", url, workspace=tmp_path / "check").returncode != 0  # head did not move
    monkeypatch.setattr(push_module, "upload_parts", real_upload)
    with SyncClient(a) as client:
        again = client.push(dataset_name, url)
    assert again.bytes_transferred == PART  # only part 2


def test_gc_aborts_abandoned_uploads(
    server: ServerProcess, store: ObjectStore, dataset_name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    a = tmp_path / "a"
    run_cli("add", dataset_name, str(_large_file(tmp_path / "in")), workspace=a)
    slow = ["push", dataset_name, f"{server.url}/{dataset_name}", "--limit-rate", "4M", "--parallel-parts", "2"]
    kill_when(slow, a, lambda: _parts_held(store, dataset_name) >= PART)
    (upload,) = store.list_multipart(f"{dataset_name}/")
    young = _gc(server, request, "--grace", "1h")
    assert young["aborted_uploads"] == [] and list(store.list_multipart(f"{dataset_name}/")) == [upload]
    dry = _gc(server, request, "--grace", "0", "--dry-run")
    assert f"{upload.key} ({upload.upload_id})" in dry["aborted_uploads"]  # type: ignore[operator]
    assert list(store.list_multipart(f"{dataset_name}/")) == [upload]
    time.sleep(1.1)
    done = _gc(server, request, "--grace", "1s")
    assert f"{upload.key} ({upload.upload_id})" in done["aborted_uploads"]  # type: ignore[operator]
    assert list(store.list_multipart(f"{dataset_name}/")) == []
    # the push starts over, and completes
    again = summary(run_cli("push", dataset_name, f"{server.url}/{dataset_name}", "--json", workspace=a))
    assert again["bytes_transferred"] == SIZE


def _pushed(server: ServerProcess, name: str, tmp_path: Path) -> tuple[Path, str]:
    """A large object pushed to ``name``: its source file and the dataset's URL."""
    source = _large_file(tmp_path / "in")
    run_cli("add", name, str(source), workspace=tmp_path / "a")
    url = f"{server.url}/{name}"
    summary(run_cli("push", name, url, "--json", workspace=tmp_path / "a"))
    return source, url


def _slow_pull(url: str) -> list[str]:
    return ["pull", url, *RANGES, "--limit-rate", "4M", "--parallel-parts", "2"]


def test_a_pull_killed_mid_object_resumes_range_by_range(
    server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    b = tmp_path / "b"
    source, url = _pushed(server, dataset_name, tmp_path)
    assert kill_when(_slow_pull(url), b, lambda: len(_ranges_done(b)) >= 3) == -signal.SIGKILL
    done = _ranges_done(b)
    assert log_of(b, dataset_name) is None  # nothing visible
    resumed = summary(run_cli("pull", url, "--json", *RANGES, workspace=b))
    assert resumed["bytes_transferred"] == SIZE - len(done) * MIB  # only the ranges still missing
    assert (b / "store" / _object_key(dataset_name, source)).read_bytes() == source.read_bytes()
    assert _staging(b) == []


def test_corrupt_ranges_are_detected(
    server: ServerProcess, store: ObjectStore, dataset_name: str, tmp_path: Path
) -> None:
    b = tmp_path / "b"
    source, url = _pushed(server, dataset_name, tmp_path)
    # a range an earlier, killed run left behind is damaged (a crash, a bad disk): the hash catches it and
    # the download starts over once, from nothing
    kill_when(_slow_pull(url), b, lambda: len(_ranges_done(b)) >= 2)
    done = _ranges_done(b)
    (staging,) = [p for p in _staging(b) if not p.name.endswith(".ranges")]
    with open(staging, "r+b") as damaged:
        damaged.seek((done[-1] - 1) * MIB + 1000)
        damaged.write(b"\xff" * 4096)  # inside a range the journal records as written
    again = summary(run_cli("pull", url, "--json", *RANGES, workspace=b))
    assert again["bytes_transferred"] == SIZE - len(done) * MIB + SIZE  # the rest, then all once more
    assert (b / "store" / _object_key(dataset_name, source)).read_bytes() == source.read_bytes()
    # an object damaged in storage: the pull fails, says so, and nothing becomes visible
    key = _object_key(dataset_name, source)
    data = bytearray(store.get(key))
    data[SIZE // 2] ^= 0xFF
    store.put(key, bytes(data))
    c = tmp_path / "c"
    failed = run_cli("pull", url, *RANGES, workspace=c)
    assert failed.returncode == 1
    assert "content does not match its hash" in failed.stderr and "Traceback" not in failed.stderr
    assert log_of(c, dataset_name) is None and _staging(c) == []


def test_large_object_settings_are_checked(tmp_path: Path) -> None:
    result = run_cli("serve", "--port", str(free_port()), "--root", str(tmp_path / "s"), "--part-size", "1M")
    assert result.returncode == 2 and "--part-size: must be 5242880..5368709120 bytes" in result.stderr
    result = run_cli("serve", "--port", str(free_port()), "--root", str(tmp_path / "s"), "--multipart-threshold", "6G")
    assert result.returncode == 2 and "--multipart-threshold: must be 1..5368709120 bytes" in result.stderr
    assert LargeObjects().range_threshold == 64 * MIB


def test_part_and_range_urls_are_refreshed_during_slow_transfers(
    request: pytest.FixtureRequest, server_factory: object, dataset_name: str, tmp_path: Path
) -> None:
    """URLs live 2 s; a large object takes ~8 s each way: the parts and ranges still missing get fresh
    URLs (as often as the object keeps progressing), and nothing is sent twice."""
    for backend in ("local", "s3"):
        s3 = request.getfixturevalue("s3_env") if backend == "s3" else None
        slow_server = server_factory("--url-ttl", "2", *SERVER_PARTS, *backend_args(backend, s3))  # type: ignore[operator]
        url = f"{slow_server.url}/{dataset_name}"
        a, b = tmp_path / f"{backend}-a", tmp_path / f"{backend}-b"
        source = _large_file(tmp_path / f"{backend}-in", 3 * PART + 1000)
        run_cli("add", dataset_name, str(source), workspace=a)
        slow = ["--limit-rate", "2M", "--parallel-parts", "1", "--json"]
        pushed = summary(run_cli("push", dataset_name, url, *slow, workspace=a))
        pulled = summary(run_cli("pull", url, *slow, *RANGES, workspace=b))
        for moved in (pushed, pulled):
            assert moved["bytes_transferred"] == source.stat().st_size
            assert moved["urls_refreshed"] > 0 and moved["seconds"] > 4
        assert (b / "store" / _object_key(dataset_name, source)).read_bytes() == source.read_bytes()
