"""The cost of a change grows with the change, not with the dataset (issue 22): a push of 25 new objects
onto a dataset of 20,000 costs the server no listing of the dataset and a bounded number of storage
requests per pushed object, at negotiation and at commit, on both stores and both protocols; a resumed
push skips what it uploaded before; a push after gc deleted what an earlier push staged uploads it again
in the same session. Requests are counted by the server's own /metrics (every call to its store)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import (
    CLI,
    ServerProcess,
    backend_args,
    empty_s3_prefix,
    run_cli,
    start_server,
    store_calls,
    summary,
)
from tests.scale import grow

#: Objects the dataset holds before the change.
DATASET_OBJECTS = 20_000
#: Objects one change adds.
CHANGE = 25
#: Store requests the server may make per pushed object and its block. Smart: a HEAD at negotiation,
#: one at commit (the bytes go straight to the store). Simple, where the bytes pass through the server:
#: the object's PUT, its block's PUT and the read of that block at commit, a HEAD on each upload and one
#: at commit ...
PER_OBJECT = {"smart": 2, "simple": 6}
#: ... and per push, whatever its size (head ref reads and the compare-and-swap, the block pack).
PER_PUSH = 12

#: A push that dies when every object is uploaded, before it asks the server to commit.
DIE_BEFORE_COMMIT = """
import os, sys
import smart_transfer.client.transports.websocket as session
original = session.ClientSession.request
async def request(self, message, *expected):
    if type(message).__name__ == "DatasetPushComplete":
        os._exit(9)
    return await original(self, message, *expected)
session.ClientSession.request = request
from smart_transfer.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def big_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace whose dataset ``big`` has DATASET_OBJECTS objects (one block each)."""
    workspace = tmp_path_factory.mktemp("big") / "ws"
    grow(workspace, "big", DATASET_OBJECTS)
    return workspace


@pytest.fixture(scope="module", params=["local", "s3"])
def big_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, big_workspace: Path
) -> Iterator[ServerProcess]:
    """A server holding ``big``, pushed from a copy of ``big_workspace`` (the tests grow that copy)."""
    s3 = request.getfixturevalue("s3_env") if request.param == "s3" else None
    root = tmp_path_factory.mktemp(f"cost-{request.param}")
    args = backend_args(request.param, s3)
    server = start_server(root / "server", *args)
    server.backend = request.param
    workspace = root / "ws"
    shutil.copytree(big_workspace, workspace)
    assert (
        summary(run_cli("push", "big", f"{server.url}/big", "--json", workspace=workspace))["blocks"] > DATASET_OBJECTS
    )
    yield server
    server.stop()
    if s3 is not None:  # the shared S3 keeps objects in RAM: give back what this module stored
        assert empty_s3_prefix(s3, args[args.index("--s3-prefix") + 1]) >= DATASET_OBJECTS  # blocks are packed


def _workspace(server: ServerProcess) -> Path:
    return server.root.parent / "ws"


def _push(server: ServerProcess, *extra: str) -> tuple[dict[str, object], Counter[str]]:
    before = store_calls(server)
    result = summary(run_cli("push", "big", f"{server.url}/big", "--json", *extra, workspace=_workspace(server)))
    return result, store_calls(server) - before


def _assert_bounded(calls: Counter[str], objects: int, protocol: str = "smart") -> None:
    # never a listing of objects (on S3 a read of the head ref is a one-key listing of the ref's own
    # records, counted as ListObjectsV2.ref: one per ref read, bounded like the other requests)
    assert calls["ListObjectsV2"] == 0, calls
    assert calls["HeadObject"] <= 2 * objects, calls
    assert sum(calls.values()) <= PER_OBJECT[protocol] * objects + PER_PUSH, calls


@pytest.mark.parametrize("protocol", ["smart", "simple"])
def test_a_small_push_onto_a_large_dataset_costs_the_change(big_server: ServerProcess, protocol: str) -> None:
    grow(_workspace(big_server), "big", CHANGE)
    result, calls = _push(big_server, "--protocol", protocol)
    assert result["objects_transferred"] == CHANGE and result["blocks"] == CHANGE
    _assert_bounded(calls, CHANGE, protocol)


def _die_before_commit(server: ServerProcess) -> None:
    died = subprocess.run(
        [
            sys.executable,
            "-c",
            DIE_BEFORE_COMMIT,
            "push",
            "big",
            f"{server.url}/big",
            "--workspace",
            str(_workspace(server)),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert died.returncode == 9, died.stderr


def test_a_resumed_push_skips_what_it_uploaded_without_listing(big_server: ServerProcess) -> None:
    grow(_workspace(big_server), "big", CHANGE)
    _die_before_commit(big_server)
    result, calls = _push(big_server)
    assert result["objects_transferred"] == 0 and result["objects_skipped"] == CHANGE
    _assert_bounded(calls, CHANGE)


def test_a_push_after_gc_deleted_its_staged_objects_uploads_them_again(
    big_server: ServerProcess, request: pytest.FixtureRequest
) -> None:
    grow(_workspace(big_server), "big", CHANGE)
    _die_before_commit(big_server)
    store_args = ["--root", str(big_server.root)]
    if big_server.backend == "s3":
        args = [str(a) for a in big_server.process.args]  # type: ignore[union-attr]
        store_args += args[args.index("--s3-endpoint") : args.index("--s3-prefix") + 2]
    gc = subprocess.run(
        [*CLI, "gc", *store_args, "--grace", "0", "--json"], capture_output=True, text=True, check=False
    )
    assert gc.returncode == 0, gc.stderr
    deleted = [key for key in summary(gc)["deleted"] if "/data/" in key]  # type: ignore[union-attr]
    assert len(deleted) == CHANGE, deleted
    result, calls = _push(big_server)  # one session: negotiation finds them absent and asks for them
    assert result["objects_transferred"] == CHANGE
    _assert_bounded(calls, CHANGE)
    # the remote holds what the workspace holds: equal heads (verify exits 3 when they differ)
    summary(run_cli("verify", "big", f"{big_server.url}/big", "--json", workspace=_workspace(big_server)))


def test_a_first_push_of_many_objects_lists_instead_of_a_head_each(big_server: ServerProcess, tmp_path: Path) -> None:
    # onto a dataset with few objects, one listing page costs less than a HEAD per object (on S3): the
    # requests still grow with the objects pushed (one page per 8 objects at most), never with the dataset
    workspace = tmp_path / "fresh"
    grow(workspace, "fresh", 200)
    before = store_calls(big_server)
    result = summary(run_cli("push", "fresh", f"{big_server.url}/fresh", "--json", workspace=workspace))
    calls = store_calls(big_server) - before
    assert result["objects_transferred"] == 200
    if big_server.backend == "s3":
        # one listing per negotiated page and one at commit, each a page or two of this small dataset
        assert calls["HeadObject"] == 0 and 2 <= calls["ListObjectsV2"] <= 200 // 8, calls
    else:  # a stat per object is cheaper than walking a directory
        assert calls["ListObjectsV2"] == 0 and calls["HeadObject"] == 2 * 200, calls
