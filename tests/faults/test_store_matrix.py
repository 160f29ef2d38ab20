"""The store-fault matrix: a misbehaving store (tests/faults/proxy.py, in front of the real local S3
and of a peer) x object classes x pull/push, through the real CLI with low bounds. Every run ends
within its bound; a failure is one line on stderr and changes nothing (the local head and a clean
verify after a pull, the server's head after a push); a fault a retry absorbs ends with exactly the
right data."""

from __future__ import annotations

import shutil
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import S3Env, ServerProcess, backend_args, make_files, run_cli, start_server, summary
from tests.faults.bounded import Bounds, fresh, local_head, one_line, run_bounded, server_head, verify_clean
from tests.faults.proxy import FAULTS, Proxy, Rule
from tests.integration.test_peers import PeerProcess, start_peer

KIB, MIB = 1024, 1024 * 1024
BOUNDS = Bounds()
#: A case's bound and, for the first, the module's set-up (ten pushes and pulls, slow under load).
pytestmark = [pytest.mark.faults, pytest.mark.timeout(BOUNDS.hard_timeout(11 * MIB) + 900)]
#: Faults one retry absorbs (attempts = 2): the run must succeed with exactly the right data.
ONCE = ("500", "503", "reset", "short")
#: Class -> (object count, object size, extra CLI flags).
CLASSES: dict[str, tuple[int, int, list[str]]] = {
    "small-curl": (3, 100 * KIB, []),
    "small-aiohttp": (3, 100 * KIB, ["--limit-rate", "1G"]),  # a rate limit moves everything to aiohttp
    "mid": (1, 2 * MIB, []),
    "ranged": (1, 3 * MIB, ["--range-threshold", "1M", "--range-size", "1M"]),
    "simple": (3, 100 * KIB, ["--protocol", "simple"]),
    "peer": (3, 100 * KIB, []),
    "multipart": (1, 11 * MIB, []),  # the server's threshold is 6M, parts 5M: three parts
}
PULL_CLASSES = ("small-curl", "small-aiohttp", "mid", "ranged", "simple", "peer")
PUSH_CLASSES = ("small-curl", "small-aiohttp", "mid", "multipart")
CASES = [(f, "always") for f in FAULTS] + [(f, "once") for f in ONCE]
#: The classes a fault that fires once is tried on: one per engine and path a retry takes (the other
#: classes share these retry paths; every class meets every fault that always fires).
ONCE_CLASSES = ("small-curl", "small-aiohttp", "ranged", "simple", "multipart")


def _cases(classes: tuple[str, ...]) -> list[tuple[str, str, str]]:
    return [(k, f, t) for k in classes for f, t in CASES if t == "always" or k in ONCE_CLASSES]


PULL_CASES, PUSH_CASES = _cases(PULL_CLASSES), _cases(PUSH_CLASSES)


@dataclass
class Stage:
    proxy: Proxy
    server: ServerProcess
    root: Path
    #: pull class -> (dataset name, workspace at v1 to copy per case)
    before: dict[str, tuple[str, Path]]
    peer_proxy: Proxy


@pytest.fixture(scope="module")
def stage(s3_env: S3Env, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stage]:
    """One server on the local S3 presigning for the proxy; per pull class a dataset at v2 on the
    server and a workspace at v1; a peer (behind its own proxy) holding the peer class's v2."""
    root = tmp_path_factory.mktemp("matrix")
    proxy = Proxy(s3_env.endpoint)
    server = start_server(
        root / "server",
        *backend_args("s3", s3_env),
        "--s3-public-endpoint",
        proxy.url,
        "--multipart-threshold",
        "6M",
        "--part-size",
        "5M",
        "--peer-ttl",
        "86400",  # the peer announced at set-up stays listed for the whole matrix
    )
    server.backend = "s3"
    a, before = root / "a", {}
    peer: PeerProcess | None = None
    peer_proxy: Proxy | None = None
    try:
        for klass in PULL_CLASSES:
            name = f"pull-{klass}"
            count, size, _ = CLASSES[klass]
            run_cli("add", name, *map(str, make_files(root / f"{name}-v1", 1, 1000, "v1")), workspace=a)
            summary(run_cli("push", name, f"{server.url}/{name}", "--json", workspace=a))
            summary(run_cli("pull", f"{server.url}/{name}", "--json", workspace=root / f"b0-{klass}"))
            run_cli("add", name, *map(str, make_files(root / f"{name}-v2", count, size, "v2")), workspace=a)
            summary(run_cli("push", name, f"{server.url}/{name}", "--json", workspace=a))
            before[klass] = (name, root / f"b0-{klass}")
        holder = root / "peer"
        peer = start_peer(holder)
        peer_proxy = Proxy(peer.url)
        summary(run_cli("pull", f"{server.url}/pull-peer", "--announce", peer_proxy.url, "--json", workspace=holder))
        yield Stage(proxy, server, root, before, peer_proxy)
    finally:
        if peer is not None:
            peer.stop(signal.SIGKILL)
        if peer_proxy is not None:
            peer_proxy.stop()
        server.stop()
        proxy.stop()


def _rule(fault: str, times: str, method: str, key: str) -> Rule:
    return Rule(fault, method=method, key=key, times=1 if times == "once" else None)


@pytest.mark.parametrize(("klass", "fault", "times"), PULL_CASES, ids=["-".join(c) for c in PULL_CASES])
def test_pull_from_a_misbehaving_store(stage: Stage, tmp_path: Path, klass: str, fault: str, times: str) -> None:
    name, template = stage.before[klass]
    _count, size, flags = CLASSES[klass]
    b = fresh(tmp_path, "b")
    shutil.copytree(template, b)
    head_before = local_head(b, name)
    target = stage.peer_proxy if klass == "peer" else stage.proxy
    stage.proxy.set_rules()
    target.set_rules(_rule(fault, times, "GET", "" if klass == "peer" else f"/{name}/"))
    try:
        outcome = run_bounded(
            ["pull", f"{stage.server.url}/{name}", "--no-fallback", *BOUNDS.flags(), *flags],
            b,
            BOUNDS.hard_timeout(size),
        )
    finally:
        hits = target.hits()
        target.set_rules()
    assert hits >= 1, "the fault never met a request: the case tests nothing"
    # a peer that misbehaves is dropped and the object read from storage; one retry absorbs a
    # transient fault
    if klass == "peer" or (times == "once" and fault in ONCE):
        assert outcome.code == 0, outcome.stderr[-3000:]
        assert local_head(b, name) == _server_local_head(stage, name)
    else:
        line = one_line(outcome)
        print(f"{klass} {fault}-{times}: {outcome.seconds:.1f} s: {line}")
        assert local_head(b, name) == head_before
    verify_clean(b, name)


def _server_local_head(stage: Stage, name: str) -> str | None:
    """The server's head as a workspace's ``log --json`` shows it (pulled fresh, no faults)."""
    scratch = fresh(stage.root, "scratch")
    summary(run_cli("pull", f"{stage.server.url}/{name}", "--json", workspace=scratch))
    return local_head(scratch, name)


@pytest.mark.parametrize(("klass", "fault", "times"), PUSH_CASES, ids=["-".join(c) for c in PUSH_CASES])
def test_push_to_a_misbehaving_store(stage: Stage, tmp_path: Path, klass: str, fault: str, times: str) -> None:
    count, size, flags = CLASSES[klass]
    name = f"push-{klass}-{fault}-{times}"
    a = fresh(tmp_path, "a")
    run_cli("add", name, *map(str, make_files(tmp_path / "in", count, size, name)), workspace=a)
    stage.proxy.set_rules(_rule(fault, times, "PUT", f"/{name}/"))
    try:
        outcome = run_bounded(
            ["push", name, f"{stage.server.url}/{name}", "--no-fallback", *BOUNDS.flags(), *flags],
            a,
            BOUNDS.hard_timeout(size),
        )
    finally:
        hits = stage.proxy.hits()
        stage.proxy.set_rules()
    assert hits >= 1, "the fault never met a request: the case tests nothing"
    if times == "once" and fault in ONCE:
        assert outcome.code == 0, outcome.stderr[-3000:]
        assert _server_local_head(stage, name) == local_head(a, name)
    else:
        line = one_line(outcome)
        print(f"{klass} {fault}-{times}: {outcome.seconds:.1f} s: {line}")
        assert server_head(stage.server, name) is None  # the remote head never moved
