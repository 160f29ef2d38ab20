"""Partial pulls under faults, on both stores: a partial pull killed mid-transfer leaves nothing visible
and a re-run resumes it; damage inside the range is reported and repaired by the next pull, a damaged
file outside it is reported while present and fetched whole by a later wider pull; a peer of a partial
workspace serves what it holds and the puller takes the rest from storage; a follower keeps its range
for every update."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from tests.conftest import S3Env, ServerProcess, backend_args, make_files, run_cli, summary
from tests.integration.test_follow import Follower, followers  # noqa: F401 - the fixture
from tests.integration.test_peers import PeerProcess, peers, storage_gets  # noqa: F401 - the fixture
from tests.integration.test_resume_and_expiry import SLOW_RATE, kill_when, log_of
from tests.slices import add_slices

SLICES = 60


def _published(tmp_path: Path, url: str, name: str, size: int = 16_384) -> Path:
    """``SLICES`` files of ``size`` bytes, a block each (blocks 1-60), pushed to ``url``."""
    a = tmp_path / "a"
    assert run_cli("add", name, *map(str, make_files(tmp_path / "in", SLICES, size)), workspace=a).returncode == 0
    summary(run_cli("push", name, url, "--json", workspace=a))
    return a


def _data_files(workspace: Path, name: str) -> list[Path]:
    folder = workspace / "store" / name / "data"
    return sorted(folder.glob("*")) if folder.is_dir() else []


def test_a_killed_partial_pull_leaves_nothing_visible_and_a_rerun_resumes(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    a, b = _published(tmp_path, url, dataset_name), tmp_path / "b"
    pull = ["pull", url, "--blocks", "31-", "--limit-rate", SLOW_RATE, "--parallel", "4"]
    assert kill_when(pull, b, lambda: len(_data_files(b, dataset_name)) >= 5) == -signal.SIGKILL
    assert log_of(b, dataset_name) is None  # nothing half-visible
    resumed = summary(run_cli("pull", url, "--blocks", "31-", "--json", workspace=b))
    assert resumed["objects_skipped"] > 0
    assert resumed["objects_transferred"] + resumed["objects_skipped"] == SLICES // 2
    assert log_of(b, dataset_name) == log_of(a, dataset_name)
    assert len(_data_files(b, dataset_name)) == SLICES // 2
    verified = orjson.loads(run_cli("verify", dataset_name, "--json", workspace=b).stdout)
    assert verified["ok"] and verified["absent_objects"] == SLICES // 2


def test_damage_inside_the_range_is_repaired_and_outside_it_fetched_whole_by_a_wider_pull(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    a, b = _published(tmp_path, url, dataset_name, 2048), tmp_path / "b"
    summary(run_cli("pull", url, "--blocks", "41-", "--json", workspace=b))
    earlier = set(_data_files(b, dataset_name))
    summary(run_cli("pull", url, "--blocks", "51-", "--json", workspace=b))  # 41-50 stay, now outside the range
    assert set(_data_files(b, dataset_name)) == earlier and len(earlier) == 20  # nothing moved, nothing dropped
    inside = [p for p in earlier if p.name in _names_of_blocks(b, dataset_name, 51, 60)]
    outside = sorted(earlier - set(inside))
    assert len(inside) == len(outside) == 10
    inside[0].write_bytes(b"damaged")
    found = run_cli("verify", dataset_name, "--json", workspace=b)
    assert found.returncode == 1 and inside[0].name in found.stdout
    repaired = summary(run_cli("pull", dataset_name, "--blocks", "51-", "--json", workspace=b))
    assert (repaired["objects_transferred"], repaired["objects_repaired"]) == (1, 1)
    assert run_cli("verify", dataset_name, workspace=b).returncode == 0

    # a file outside the range that the workspace holds is verified like any: damage is reported
    good = (a / "store" / dataset_name / "data" / outside[0].name).read_bytes()
    outside[0].write_bytes(b"damaged too")
    found = run_cli("verify", dataset_name, "--json", workspace=b)
    assert found.returncode == 1 and outside[0].name in found.stdout  # moved to quarantine, named
    again = orjson.loads(run_cli("verify", dataset_name, "--json", workspace=b).stdout)
    assert again["ok"] and again["absent_objects"] == 41  # absent by choice now, not lost
    wider = summary(run_cli("pull", dataset_name, "--json", workspace=b))  # every slice: a good copy too
    assert wider["objects_transferred"] == 41
    assert outside[0].read_bytes() == good
    assert run_cli("verify", dataset_name, workspace=b).returncode == 0


def _names_of_blocks(workspace: Path, name: str, first: int, last: int) -> set[str]:
    """The object file names of the slices blocks ``first`` to ``last`` add."""
    lines = run_cli("log", name, "--json", workspace=workspace).stdout.splitlines()
    names = set()
    for line in lines:
        block = orjson.loads(line)
        if first <= block["sequence_number"] <= last:
            names.add(str(block["new_data"]["physical_hash"]))
    return names


def test_a_peer_of_a_partial_workspace_serves_what_it_holds_and_storage_the_rest(
    server_factory: Callable[..., ServerProcess],
    s3_env: S3Env,
    peers: Callable[..., PeerProcess],  # noqa: F811 - the fixture
    tmp_path: Path,
    dataset_name: str,
) -> None:
    server = server_factory(*backend_args("s3", s3_env))
    url = f"{server.url}/{dataset_name}"
    a = _published(tmp_path, url, dataset_name, 4096)
    b, c = tmp_path / "b", tmp_path / "c"
    peer = peers(b)
    summary(run_cli("pull", url, "--blocks", "31-", "--announce", peer.url, "--json", workspace=b))
    before = storage_gets(server)
    pulled = summary(run_cli("pull", url, "--json", workspace=c))
    assert (pulled["objects_from_peers"], pulled["objects_transferred"]) == (SLICES // 2, SLICES)
    assert storage_gets(server) - before == SLICES // 2  # what the peer lacks came from storage
    assert [p.read_bytes() for p in _data_files(c, dataset_name)] == [
        p.read_bytes() for p in _data_files(a, dataset_name)
    ]
    assert run_cli("verify", dataset_name, workspace=c).returncode == 0


def test_a_follower_keeps_its_range_for_every_update(
    smart_server: ServerProcess,
    dataset_name: str,
    tmp_path: Path,
    followers: list[Follower],  # noqa: F811 - the fixture
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    source, b = tmp_path / "source", tmp_path / "b"
    add_slices(source, dataset_name, tmp_path / "f0", [10, 10, 10])
    summary(run_cli("push", dataset_name, url, "--json", workspace=source))
    follower = Follower(url, b, "--last", "10")
    followers.append(follower)
    first_head = str(
        orjson.loads(run_cli("log", dataset_name, "--json", workspace=source).stdout.splitlines()[0])["hash"]
    )
    follower.wait_for_head(first_head)
    add_slices(source, dataset_name, tmp_path / "f1", [10, 10], start=30)
    head = str(summary(run_cli("push", dataset_name, url, "--json", workspace=source))["new_head"])
    follower.wait_for_head(head)
    assert follower.interrupt() == 0
    updates = [update for _, update in follower.updates]
    assert updates[0]["objects_transferred"] == 1 and updates[-1]["objects_transferred"] == 1  # the newest slice
    verified = orjson.loads(run_cli("verify", dataset_name, "--json", workspace=b).stdout)
    # blocks 1-4: outside the last 10 records (block 3's slice, held after the first update, dropped once it fell
    # out: a follower of a range stays bounded)
    assert verified["ok"] and verified["absent_objects"] == 4


@pytest.mark.parametrize("protocol", ["smart", "simple"])
def test_a_partial_pull_on_either_protocol_moves_the_same_objects(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, protocol: str
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    _published(tmp_path, url, dataset_name, 1024)
    pulled = summary(
        run_cli("pull", url, "--blocks", "11-20", "--protocol", protocol, "--json", workspace=tmp_path / "b")
    )
    assert pulled["objects_transferred"] == 10 and pulled["blocks"] == SLICES + 1
