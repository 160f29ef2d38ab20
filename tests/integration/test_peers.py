"""Peer-to-peer pulls: a workspace serves its objects (`peer serve`), announces them with its pull,
and other readers of the dataset fetch from it instead of storage, verifying every object. Real
processes throughout: the server on the local S3, peers, and CLI clients on 127.0.0.1."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
import pytest

from tests.conftest import CLI, S3Env, ServerProcess, backend_args, free_port, make_files, run_cli, summary
from tests.integration.test_operations import metrics_of, sample, wait_until
from tests.integration.test_smart_transfer import files_of

PEER_START_TIMEOUT = 30.0
OBJECTS = 12


@dataclass
class PeerProcess:
    """A real ``peer serve`` on 127.0.0.1 and an ephemeral port."""

    url: str
    process: subprocess.Popen[str]

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(15)


def start_peer(workspace: Path, *extra: str) -> PeerProcess:
    process = subprocess.Popen(
        [*CLI, "peer", "serve", "--workspace", str(workspace), "--port", str(free_port()), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    found: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            match = re.search(r"at (http://127\.0\.0\.1:\d+)", line)
            if match and not found:
                found.append(match.group(1))

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + PEER_START_TIMEOUT
    while not found and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    if not found:
        process.kill()
        pytest.fail("peer did not start")
    return PeerProcess(found[0], process)


@pytest.fixture
def peers() -> Iterator[Callable[..., PeerProcess]]:
    started: list[PeerProcess] = []

    def factory(workspace: Path, *extra: str) -> PeerProcess:
        peer = start_peer(workspace, *extra)
        started.append(peer)
        return peer

    yield factory
    for peer in started:
        peer.stop(signal.SIGKILL)


def storage_gets(server: ServerProcess) -> float:
    """Presigned GETs the server handed out: the only way a smart client reads object bytes from S3."""
    return sample(metrics_of(server), "smart_transfer_urls_signed_total", method="GET")


def verified(workspace: Path, name: str) -> None:
    result = run_cli("verify", name, "--json", workspace=workspace)
    assert result.returncode == 0, result.stdout + result.stderr
    assert orjson.loads(result.stdout)["problems"] == []


@pytest.fixture
def pushed(
    server_factory: Callable[..., ServerProcess], s3_env: S3Env, tmp_path: Path, dataset_name: str
) -> tuple[ServerProcess, str, Path]:
    """A server on the local S3 and a dataset A pushed there: (server, dataset URL, A's workspace)."""
    server = server_factory(*backend_args("s3", s3_env))
    a = tmp_path / "a"
    assert (
        run_cli(
            "add", dataset_name, *map(str, make_files(tmp_path / "in", OBJECTS, 128 * 1024)), workspace=a
        ).returncode
        == 0
    )
    summary(run_cli("push", dataset_name, f"{server.url}/{dataset_name}", "--json", workspace=a))
    return server, f"{server.url}/{dataset_name}", a


def test_a_pull_with_a_live_peer_reads_nothing_from_storage(
    pushed: tuple[ServerProcess, str, Path], peers: Callable[..., PeerProcess], tmp_path: Path, dataset_name: str
) -> None:
    server, url, a = pushed
    b, c = tmp_path / "b", tmp_path / "c"
    peer = peers(b)
    first = summary(run_cli("pull", url, "--announce", peer.url, "--json", workspace=b))
    assert (first["objects_transferred"], first["objects_from_peers"]) == (OBJECTS, 0)
    assert sample(metrics_of(server), "smart_transfer_peer_announcements_total") == 1

    before = storage_gets(server)
    pulled = summary(run_cli("pull", url, "--json", workspace=c))
    assert storage_gets(server) == before  # zero object GETs from storage for C
    assert (pulled["peers_listed"], pulled["objects_from_peers"], pulled["objects_transferred"]) == (
        1,
        OBJECTS,
        OBJECTS,
    )
    assert pulled["bytes_from_peers"] == OBJECTS * 128 * 1024 and pulled["peers_dropped"] == {}
    assert files_of(c, dataset_name) == files_of(a, dataset_name)
    verified(c, dataset_name)
    assert httpx.get(f"{peer.url}/healthz").json()["objects_served"] == OBJECTS

    # B's own pulls never list B; --no-peers reads storage only
    again = summary(run_cli("pull", url, "--announce", peer.url, "--json", workspace=b))
    assert again["peers_listed"] == 0
    d = summary(run_cli("pull", url, "--no-peers", "--json", workspace=tmp_path / "d"))
    assert (d["peers_listed"], d["objects_from_peers"]) == (1, 0)


def test_a_peer_killed_mid_transfer_leaves_the_rest_to_storage(
    pushed: tuple[ServerProcess, str, Path], peers: Callable[..., PeerProcess], tmp_path: Path, dataset_name: str
) -> None:
    server, url, a = pushed
    b, c = tmp_path / "b", tmp_path / "c"
    summary(run_cli("pull", url, "--json", workspace=b))
    peer = peers(b, "--limit-rate", "512K")  # ~3 s for the dataset: it dies in the middle
    summary(run_cli("pull", url, "--announce", peer.url, "--json", workspace=b))

    before = storage_gets(server)
    client = subprocess.Popen(
        [*CLI, "pull", url, "--json", "--parallel", "4", "--workspace", str(c)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    landed = c / "store" / dataset_name / "data"
    wait_until(lambda: landed.is_dir() and any(landed.iterdir()), timeout=60)
    peer.stop(signal.SIGKILL)
    out, err = client.communicate(timeout=120)
    assert client.returncode == 0, err
    pulled = orjson.loads(out)
    assert 0 < pulled["objects_from_peers"] < OBJECTS, pulled
    assert pulled["objects_transferred"] == OBJECTS
    assert f"{peer.url}/{dataset_name}" in pulled["peers_dropped"], pulled
    assert "storage" not in pulled["peers_dropped"][f"{peer.url}/{dataset_name}"]  # the peer failed, not storage
    assert storage_gets(server) - before == OBJECTS - pulled["objects_from_peers"]
    assert files_of(c, dataset_name) == files_of(a, dataset_name)
    verified(c, dataset_name)


def test_a_peer_serving_corrupt_bytes_is_dropped_and_the_pull_stays_intact(
    pushed: tuple[ServerProcess, str, Path], peers: Callable[..., PeerProcess], tmp_path: Path, dataset_name: str
) -> None:
    server, url, a = pushed
    b, c = tmp_path / "b", tmp_path / "c"
    peer = peers(b)
    summary(run_cli("pull", url, "--announce", peer.url, "--json", workspace=b))
    # every object B holds rots (same sizes): whatever C asks first does not verify
    for path in (b / "store" / dataset_name / "data").iterdir():
        path.write_bytes(os.urandom(path.stat().st_size))

    before = storage_gets(server)
    pulled = summary(run_cli("pull", url, "--json", workspace=c))
    assert pulled["objects_from_peers"] == 0, pulled
    reason = pulled["peers_dropped"][f"{peer.url}/{dataset_name}"]
    assert "do not verify" in reason and reason.startswith("the peer served") and "storage" not in reason
    assert storage_gets(server) - before == OBJECTS
    assert files_of(c, dataset_name) == files_of(a, dataset_name)  # not one corrupt byte became visible
    verified(c, dataset_name)
    assert not any((c / "store" / ".store" / "tmp").iterdir())  # the refused downloads were removed


def test_a_peer_serves_only_what_it_holds_and_says_busy_at_its_limit(
    pushed: tuple[ServerProcess, str, Path], peers: Callable[..., PeerProcess], tmp_path: Path, dataset_name: str
) -> None:
    a = pushed[2]
    peer = peers(a, "--max-transfers", "1", "--limit-rate", "64K")
    name, held = next(iter(files_of(a, dataset_name).items()))
    assert httpx.get(f"{peer.url}/{dataset_name}").status_code == 200
    missing = httpx.get(f"{peer.url}/{dataset_name}/data/f1220{'0' * 64}")
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "ObjectNotFound")
    for bad in ("not-a-hash", name.upper(), "f1220" + "0" * 63):
        assert httpx.get(f"{peer.url}/{dataset_name}/data/{bad}").json()["error"]["code"] == "InvalidHash"
    assert httpx.get(f"{peer.url}/other/data/{name}").status_code == 404
    assert httpx.get(f"{peer.url}/{dataset_name}/blocks/{name}").json()["error"]["code"] == "InvalidHash"

    slow: list[httpx.Response] = []
    sending = threading.Thread(target=lambda: slow.append(httpx.get(f"{peer.url}/{dataset_name}/data/{name}")))
    sending.start()
    wait_until(lambda: httpx.get(f"{peer.url}/healthz").json()["active"] == 1, timeout=10)
    busy = httpx.get(f"{peer.url}/{dataset_name}/data/{name}")
    assert (busy.status_code, busy.headers["Retry-After"], busy.json()["error"]["code"]) == (429, "1", "Busy")
    sending.join(30)
    assert slow[0].status_code == 200 and slow[0].content == held


def test_peers_are_listed_only_to_readers_of_the_dataset(
    server_factory: Callable[..., ServerProcess], peers: Callable[..., PeerProcess], tmp_path: Path, dataset_name: str
) -> None:
    tokens = tmp_path / "tokens.json"

    def token(subject: str, *grants: str) -> str:
        result = run_cli("token", "add", "--tokens", str(tokens), "--subject", subject, *grants)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    writer = token("writer", "--write", dataset_name)
    reader = token("reader", "--read", dataset_name)
    stranger = token("stranger", "--read", "other-*")
    server = server_factory("--tokens", str(tokens))
    url = f"{server.url}/{dataset_name}"
    a, b = tmp_path / "a", tmp_path / "b"
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "in", 2, 1000)), workspace=a)
    summary(run_cli("push", dataset_name, url, "--token", writer, "--json", workspace=a))
    peer = peers(b)
    summary(run_cli("pull", url, "--token", reader, "--announce", peer.url, "--json", workspace=b))

    refused = run_cli("pull", url, "--token", stranger, "--json", workspace=tmp_path / "s")
    assert refused.returncode == 3 and "Forbidden" in refused.stderr and peer.url not in refused.stdout + refused.stderr
    listed = summary(run_cli("pull", url, "--token", reader, "--json", workspace=tmp_path / "r"))
    assert (listed["peers_listed"], listed["objects_from_peers"]) == (1, 2)


def test_announcing_needs_a_usable_url_and_the_smart_protocol(local_server: ServerProcess, tmp_path: Path) -> None:
    url = f"{local_server.url}/some-dataset"
    for announce, text in (
        ("http://user:pw@127.0.0.1:9", "credentials"),
        ("ftp://127.0.0.1:9", "not a peer URL"),
        ("http://127.0.0.1:99999", "malformed host or port"),
    ):
        result = run_cli("pull", url, "--announce", announce, workspace=tmp_path / "w")
        assert result.returncode == 2 and text in result.stderr and "Traceback" not in result.stderr, result.stderr
    simple = run_cli("pull", url, "--protocol", "simple", "--announce", "http://127.0.0.1:9", workspace=tmp_path / "w")
    assert simple.returncode == 2 and "smart protocol" in simple.stderr
