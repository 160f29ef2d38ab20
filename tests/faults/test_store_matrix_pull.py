"""The store-fault matrix, pulls: a misbehaving store (tests/faults/proxy.py, in front of the real local
S3 and of a peer) x object classes, through the real CLI with low bounds. Every run ends within its
bound; a failure is one line on stderr and changes nothing (the local head and a clean verify); a fault
a retry absorbs ends with exactly the right data. Shared parts: tests/faults/store_matrix.py."""

from __future__ import annotations

import shutil
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import S3Env, make_files, run_cli, summary
from tests.faults.bounded import fresh, local_head, one_line, run_bounded, verify_clean
from tests.faults.proxy import Proxy
from tests.faults.store_matrix import (
    BOUNDS,
    CASE_TIMEOUT,
    CLASSES,
    ONCE,
    PULL_CASES,
    PULL_CLASSES,
    Stage,
    matrix_stage,
    rule,
    server_local_head,
)
from tests.integration.test_peers import start_peer

pytestmark = [pytest.mark.faults, pytest.mark.timeout(CASE_TIMEOUT)]


@dataclass
class PullStage:
    """The matrix's server and proxy, and what every pull case starts from."""

    stage: Stage
    #: pull class -> (dataset name, workspace at v1 to copy per case)
    before: dict[str, tuple[str, Path]]
    peer_proxy: Proxy


@pytest.fixture(scope="module")
def pulls(s3_env: S3Env, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PullStage]:
    """Per pull class a dataset at v2 on the server and a workspace at v1; a peer (behind its own
    proxy) holding the peer class's v2."""
    root = tmp_path_factory.mktemp("matrix")
    with matrix_stage(s3_env, root) as stage:
        a, before = root / "a", {}
        url = stage.server.url
        for klass in PULL_CLASSES:
            name = f"pull-{klass}"
            count, size, _ = CLASSES[klass]
            run_cli("add", name, *map(str, make_files(root / f"{name}-v1", 1, 1000, "v1")), workspace=a)
            summary(run_cli("push", name, f"{url}/{name}", "--json", workspace=a))
            summary(run_cli("pull", f"{url}/{name}", "--json", workspace=root / f"b0-{klass}"))
            run_cli("add", name, *map(str, make_files(root / f"{name}-v2", count, size, "v2")), workspace=a)
            summary(run_cli("push", name, f"{url}/{name}", "--json", workspace=a))
            before[klass] = (name, root / f"b0-{klass}")
        holder = root / "peer"
        peer = start_peer(holder)
        try:
            peer_proxy = Proxy(peer.url)
            try:
                summary(run_cli("pull", f"{url}/pull-peer", "--announce", peer_proxy.url, "--json", workspace=holder))
                yield PullStage(stage, before, peer_proxy)
            finally:
                peer_proxy.stop()
        finally:
            peer.stop(signal.SIGKILL)


@pytest.mark.parametrize(("klass", "fault", "times"), PULL_CASES, ids=["-".join(c) for c in PULL_CASES])
def test_pull_from_a_misbehaving_store(pulls: PullStage, tmp_path: Path, klass: str, fault: str, times: str) -> None:
    stage = pulls.stage
    name, template = pulls.before[klass]
    _count, size, flags = CLASSES[klass]
    b = fresh(tmp_path, "b")
    shutil.copytree(template, b)
    head_before = local_head(b, name)
    target = pulls.peer_proxy if klass == "peer" else stage.proxy
    stage.proxy.set_rules()
    target.set_rules(rule(fault, times, "GET", "" if klass == "peer" else f"/{name}/"))
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
        assert local_head(b, name) == server_local_head(stage, name)
    else:
        line = one_line(outcome)
        print(f"{klass} {fault}-{times}: {outcome.seconds:.1f} s: {line}")
        assert local_head(b, name) == head_before
    verify_clean(b, name)
