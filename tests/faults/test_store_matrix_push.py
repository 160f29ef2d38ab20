"""The store-fault matrix, pushes: a misbehaving store (tests/faults/proxy.py, in front of the real local
S3) x object classes, through the real CLI with low bounds. Every run ends within its bound; a failure
is one line on stderr and leaves the server's head where it was; a fault a retry absorbs ends with
exactly the right data. Shared parts: tests/faults/store_matrix.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import S3Env, make_files, run_cli
from tests.faults.bounded import fresh, local_head, one_line, run_bounded, server_head
from tests.faults.store_matrix import (
    BOUNDS,
    CASE_TIMEOUT,
    CLASSES,
    ONCE,
    PUSH_CASES,
    Stage,
    matrix_stage,
    rule,
    server_local_head,
)

pytestmark = [pytest.mark.faults, pytest.mark.timeout(CASE_TIMEOUT)]


@pytest.fixture(scope="module")
def stage(s3_env: S3Env, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stage]:
    with matrix_stage(s3_env, tmp_path_factory.mktemp("matrix")) as stage:
        yield stage


@pytest.mark.parametrize(("klass", "fault", "times"), PUSH_CASES, ids=["-".join(c) for c in PUSH_CASES])
def test_push_to_a_misbehaving_store(stage: Stage, tmp_path: Path, klass: str, fault: str, times: str) -> None:
    count, size, flags = CLASSES[klass]
    name = f"push-{klass}-{fault}-{times}"
    a = fresh(tmp_path, "a")
    run_cli("add", name, *map(str, make_files(tmp_path / "in", count, size, name)), workspace=a)
    stage.proxy.set_rules(rule(fault, times, "PUT", f"/{name}/"))
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
        assert server_local_head(stage, name) == local_head(a, name)
    else:
        line = one_line(outcome)
        print(f"{klass} {fault}-{times}: {outcome.seconds:.1f} s: {line}")
        assert server_head(stage.server, name) is None  # the remote head never moved
