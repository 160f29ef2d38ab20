"""Shared fixtures: the real local S3 server (Ceph RGW) and real server processes on 127.0.0.1.

``make test`` starts S3 once and passes it in through SMART_TRANSFER_TEST_S3_* variables; a plain
``pytest`` run starts its own instance through scripts/s3-local.sh and stops it at the end.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import subprocess
import sys
import threading
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import httpx
import orjson
import pytest
from botocore.config import Config
from hypothesis import HealthCheck, settings

from smart_transfer.storage import ObjectStore
from smart_transfer.storage.local import LocalStore
from smart_transfer.storage.s3 import S3Store

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "smart_transfer.cli.main"]
# Every process the tests start runs this checkout's code, whatever is installed and whatever their
# working directory (a relative PYTHONPATH entry would resolve against it).
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT), *(str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
)
SERVER_START_TIMEOUT = 30.0

# Property tests check correctness, never speed (speed is `make bench`'s): no per-example deadline and no
# "too slow" health check, which fail a correct test when the machine is busy (a parallel run, the S3
# gateway, a benchmark beside it).
settings.register_profile("smart-transfer", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("smart-transfer")
#: Seconds any test's plain HTTP request (httpx, without a timeout of its own) may wait, instead of
#: httpx's 5 s: tests run in parallel workers beside servers and S3 on two cores, and none measures speed.
TEST_HTTP_TIMEOUT = 60.0
# httpx binds its default Timeout object into every signature; updated in place, it covers them all.
_httpx_default = httpx._config.DEFAULT_TIMEOUT_CONFIG
_httpx_default.connect = _httpx_default.read = _httpx_default.write = _httpx_default.pool = TEST_HTTP_TIMEOUT


#: The test files that take minutes (JVM starts, tens of thousands of objects), longest first (CI's
#: junit times). ``make test`` runs ``--dist loadfile``, which hands files to workers in collection
#: order: these ran near the end of it (tests/spark sorts late) and kept one worker busy long after the
#: others were done (simulated on CI's times: 2,896 s in collection order, 2,623 s longest first, the
#: most three workers can do). Every other file keeps its place, after these.
LONG_FILES = (
    # make test-faults (two workers): the longest fault files first, so they run side by side
    "tests/faults/test_store_matrix_pull.py",
    "tests/faults/test_faults.py",
    "tests/integration/test_cli_fuzz.py",
    "tests/faults/test_store_matrix_push.py",
    "tests/faults/test_damaged_storage.py",
    # make test
    "tests/integration/test_checkpoint_pages.py",
    "tests/spark/test_ingest_errors.py",
    "tests/integration/test_read.py",
    "tests/integration/test_resume_and_expiry.py",
    "tests/integration/test_one_flow.py",
    "tests/spark/test_ingest_cluster.py",
    "tests/integration/test_change_cost.py",
    "tests/integration/test_delta_sharing.py",
    "tests/spark/test_checkpoint_sync.py",
    "tests/spark/test_ingest_keys.py",
    "tests/integration/test_remotes.py",
    "tests/integration/test_packs.py",
    "tests/browser/test_ui.py",
    "tests/integration/test_large_objects.py",
    "tests/integration/test_smart_transfer.py",
    "tests/spark/test_demo.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the files of LONG_FILES first, in that order (a stable sort: tests within a file, and the
    other files, keep their order)."""
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(LONG_FILES)))


@dataclass(frozen=True)
class S3Env:
    endpoint: str
    bucket: str
    env: dict[str, str]


def _free_port_pair() -> int:
    """A port p with p and p+1 free (the local S3 script uses p+1 for its monitor)."""
    for _ in range(100):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port >= 65000:
            continue
        with socket.socket() as other:
            try:
                other.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return int(port)
    raise RuntimeError("no free port pair")


@pytest.fixture(scope="session")
def s3_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Env]:
    endpoint = os.environ.get("SMART_TRANSFER_TEST_S3_ENDPOINT")
    if endpoint:
        yield S3Env(endpoint, os.environ["SMART_TRANSFER_TEST_S3_BUCKET"], {})
        return
    directory = tmp_path_factory.mktemp("s3")
    port = _free_port_pair()
    script = str(ROOT / "scripts" / "s3-local.sh")
    result = subprocess.run(
        ["bash", script, "start", str(directory), str(port)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        subprocess.run(["bash", script, "stop", str(directory)], check=False)
        pytest.fail(f"local S3 did not start: {result.stderr[-2000:]}")
    env = dict(re.findall(r"^export (\w+)=(.*)$", result.stdout, re.M))
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield S3Env(env["SMART_TRANSFER_TEST_S3_ENDPOINT"], env["SMART_TRANSFER_TEST_S3_BUCKET"], env)
    finally:
        subprocess.run(["bash", script, "stop", str(directory)], check=False)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


#: Keys one S3 DeleteObjects request may name (the S3 API's limit).
DELETE_BATCH = 1000


def empty_s3_prefix(s3: S3Env, prefix: str) -> int:
    """Delete every object and abort every multipart upload under ``prefix`` of the test bucket, a
    thousand keys per DeleteObjects request (a DELETE per key took minutes for a 40,000-object
    fixture); returns how many objects were deleted. The shared S3 keeps objects in RAM."""
    client = boto3.session.Session().client(
        "s3", endpoint_url=s3.endpoint, config=Config(signature_version="s3v4", s3={"addressing_style": "path"})
    )
    full = prefix.strip("/") + "/"
    for page in client.get_paginator("list_multipart_uploads").paginate(Bucket=s3.bucket, Prefix=full):
        for upload in page.get("Uploads", []):
            client.abort_multipart_upload(Bucket=s3.bucket, Key=upload["Key"], UploadId=upload["UploadId"])
    deleted = 0
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=s3.bucket, Prefix=full, PaginationConfig={"PageSize": DELETE_BATCH}
    ):
        keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        if keys:
            response = client.delete_objects(Bucket=s3.bucket, Delete={"Objects": keys, "Quiet": True})
            assert not response.get("Errors"), response["Errors"][:3]
            deleted += len(keys)
    client.close()
    return deleted


@pytest.fixture
def s3_prefix() -> str:
    """A fresh key prefix, so tests sharing the bucket never see each other's objects."""
    return f"t-{secrets.token_hex(6)}"


@pytest.fixture
def s3_store(s3_env: S3Env, s3_prefix: str) -> Iterator[S3Store]:
    store = S3Store(s3_env.bucket, s3_prefix, endpoint_url=s3_env.endpoint)
    yield store
    store.close()


@pytest.fixture(params=["local", "s3"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[type[ObjectStore] | object]:
    """A factory of stores that all see the same objects (as two servers on one bucket would)."""
    created: list[ObjectStore] = []
    prefix = f"repo-{secrets.token_hex(6)}"

    def factory() -> ObjectStore:
        if request.param == "local":
            store: ObjectStore = LocalStore(tmp_path / "store")
        else:
            s3_env: S3Env = request.getfixturevalue("s3_env")
            store = S3Store(s3_env.bucket, prefix, endpoint_url=s3_env.endpoint)
        created.append(store)
        return store

    yield factory
    for store in created:
        store.close()


@dataclass
class ServerProcess:
    """A real ``smart-transfer serve`` process on 127.0.0.1 and an ephemeral port."""

    url: str
    process: subprocess.Popen[str]
    root: Path
    output: list[str] = field(default_factory=list)
    #: "local" (embedded store) or "s3", for tests that reach behind the server into its store
    backend: str = "local"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def free_port() -> int:
    """An ephemeral port that is free now (ports are 1-65535: the server refuses 0). Another process may
    take it before the server binds; ``start_server`` then tries another."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(root: Path, *extra: str, env: dict[str, str] | None = None) -> ServerProcess:
    """Start a server process on a free ephemeral port (unless ``extra`` names one) and wait for its
    'listening on' line."""
    if "--port" in extra:
        return _start_server(root, *extra, env=env)
    for _ in range(4):
        try:
            return _start_server(root, "--port", str(free_port()), *extra, env=env)
        except PortTaken:
            continue
    return _start_server(root, "--port", str(free_port()), *extra, env=env)


class PortTaken(RuntimeError):
    """The port chosen for a server was taken by another process before the server bound it."""


def _start_server(root: Path, *extra: str, env: dict[str, str] | None = None) -> ServerProcess:
    process = subprocess.Popen(
        [*CLI, "serve", "--host", "127.0.0.1", "--root", str(root), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert process.stdout is not None
    found: list[str] = []
    lines: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            match = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
            if match and not found:
                found.append(match.group(1))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = SERVER_START_TIMEOUT
    step = 0.05
    waited = 0.0
    while not found and waited < deadline and process.poll() is None:
        threading.Event().wait(step)
        waited += step
    if not found:
        process.kill()
        if "cannot listen" in "".join(lines):
            raise PortTaken("".join(lines))
        raise RuntimeError("server did not start:\n" + "".join(lines))
    return ServerProcess(found[0], process, root, lines)


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Start servers for one test; every one is stopped afterwards."""
    started: list[ServerProcess] = []

    def factory(*extra: str, root: Path | None = None, env: dict[str, str] | None = None) -> ServerProcess:
        server = start_server(root or tmp_path / f"server{len(started)}", *extra, env=env)
        started.append(server)
        return server

    yield factory
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One embedded-store server shared by the tests that only need its presigned-URL routes."""
    server = start_server(tmp_path_factory.mktemp("local-server"))
    yield server
    server.stop()


def run_cli(*args: str, workspace: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the CLI as a user would (a real process)."""
    extra = ["--workspace", str(workspace)] if workspace is not None else []
    return subprocess.run([*CLI, *args, *extra], capture_output=True, text=True, check=False, timeout=timeout)


def summary(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The --json summary of a CLI run that must have succeeded."""
    assert result.returncode == 0, result.stderr
    value = orjson.loads(result.stdout)
    assert isinstance(value, dict)
    return value


def make_files(directory: Path, count: int, size: int, tag: str = "") -> list[Path]:
    """``count`` files of ``size`` random bytes (distinct contents)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = directory / f"{tag}{i:05d}.bin"
        path.write_bytes(os.urandom(size))
        paths.append(path)
    return paths


def backend_args(kind: str, s3: S3Env | None) -> list[str]:
    """``serve`` options for a backend: the embedded store, or a fresh prefix on the local S3."""
    if kind == "local":
        return []
    assert s3 is not None
    return ["--s3-endpoint", s3.endpoint, "--s3-bucket", s3.bucket, "--s3-prefix", f"srv-{secrets.token_hex(6)}"]


@pytest.fixture(scope="module", params=["local", "s3"])
def smart_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server per backend for a test module; tests use their own dataset names."""
    s3 = request.getfixturevalue("s3_env") if request.param == "s3" else None
    server = start_server(tmp_path_factory.mktemp(f"smart-{request.param}"), *backend_args(request.param, s3))
    server.backend = request.param
    yield server
    server.stop()


@pytest.fixture
def dataset_name() -> str:
    return f"ds-{secrets.token_hex(4)}"


@dataclass
class Balancer:
    """A real nginx on 127.0.0.1 in front of server replicas (scripts/nginx-local.sh)."""

    url: str
    directory: Path

    def stop(self) -> None:
        subprocess.run(["bash", str(ROOT / "scripts" / "nginx-local.sh"), "stop", str(self.directory)], check=False)


def start_balancer(directory: Path, replicas: list[ServerProcess], read_timeout: str = "2s") -> Balancer:
    """nginx (installed if missing) with WebSocket upgrade and ``proxy_read_timeout read_timeout``."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    upstreams = [replica.url.removeprefix("http://") for replica in replicas]
    result = subprocess.run(
        [
            "bash",
            str(ROOT / "scripts" / "nginx-local.sh"),
            "start",
            str(directory),
            str(port),
            read_timeout,
            *upstreams,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(f"nginx did not start: {result.stderr[-2000:]}")
    return Balancer(result.stdout.strip().splitlines()[-1], directory)


def start_replicas(root: Path, count: int, *extra: str) -> list[ServerProcess]:
    """``count`` servers on one store (same bucket and prefix in ``extra``), each with its own index."""
    replicas = [start_server(root / f"replica{i}", *extra) for i in range(count)]
    for replica in replicas:
        replica.backend = "s3"
    return replicas


def store_calls(server: ServerProcess) -> Counter[str]:
    """The server's calls to its store so far, by operation (its /metrics)."""
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as response:
        text = response.read().decode()
    found = re.findall(r'^smart_transfer_store_seconds_count\{operation="(\w+)"\} (\S+)$', text, re.M)
    return Counter({operation: int(float(count)) for operation, count in found})
