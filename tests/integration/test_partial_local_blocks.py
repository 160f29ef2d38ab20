"""A partial workspace that goes on past its remote, or whose remote went back, on both stores: the objects
of blocks no remote holds are always wanted (a lost one is lost, never absent by choice, whatever the
recorded range), reads fetch on demand and a pull fetches a range while the local chain is ahead (the
common chain's objects, up to the remote head); a forced pull of "the last N records" onto a rewound
remote fetches what the older head's window reaches in the kept chain; a file outside the range that is
there but short is damage for reads as for verify."""

from __future__ import annotations

from pathlib import Path

import orjson

from smart_transfer.client import SyncClient, open_dataset
from smart_transfer.client.inspection.holdings import holdings
from smart_transfer.client.inspection.verify import verify_local
from smart_transfer.model.selection import Selection, SliceRange
from smart_transfer.repo import Workspace
from tests.conftest import ServerProcess, run_cli, summary
from tests.integration.test_read import one_line_error
from tests.slices import add_slices

#: Three slices of 100 records: blocks 1-3, offsets 0-299.
COUNTS = [100, 100, 100]


def _state_only(server: ServerProcess, name: str, tmp_path: Path) -> tuple[Path, Path, str]:
    """Workspace ``a`` that pushed COUNTS, and ``b`` that pulled it with --state-only."""
    a, b = tmp_path / "a", tmp_path / "b"
    url = f"{server.url}/{name}"
    add_slices(a, name, tmp_path / "in", COUNTS)
    summary(run_cli("push", name, url, "--json", workspace=a))
    summary(run_cli("pull", url, "--state-only", "--json", workspace=b))
    return a, b, url


def _file_of_block(workspace: Path, name: str, block: int) -> Path:
    """Where the data slice block ``block`` added is (or would be) in ``workspace``."""
    with open_dataset(workspace, name) as dataset:
        [entry] = dataset.slices(blocks=(block, block))
        return dataset.workspace.local_store.path_of(dataset.workspace.dataset(name).object_key(entry.ref))


def test_a_lost_slice_no_remote_holds_is_lost_never_absent_by_choice(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    _, b, _ = _state_only(smart_server, dataset_name, tmp_path)
    add_slices(b, dataset_name, tmp_path / "local", [50], start=300)  # block 4: only this workspace has it
    new = _file_of_block(b, dataset_name, 4)
    assert new.is_file()
    new.unlink()

    report, _ = verify_local(Workspace(b, read_only=True), dataset_name)
    assert not report.ok and any(new.name in problem for problem in report.problems)
    assert report.absent_slices == 3  # the pulled range's: blocks 1-3, still absent by choice
    partial = holdings(Workspace(b, read_only=True), dataset_name)
    assert partial is not None and partial.absent_slices == 3  # status does not offer a pull for block 4
    result = run_cli("tail", dataset_name, "-n", "10", workspace=b)
    one_line_error(result, 1, "is missing from the workspace")
    assert "by choice" not in result.stderr
    # a range that ends before it: block 4 is still wanted (the rule, not the range, says so)
    with SyncClient(b) as client:
        client.pull(dataset_name, blocks="1-1")
    again, _ = verify_local(Workspace(b, read_only=True), dataset_name)
    assert not again.ok and any(new.name in problem for problem in again.problems)


def test_reads_and_pulls_fetch_while_the_local_chain_is_ahead(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    _, b, url = _state_only(smart_server, dataset_name, tmp_path)
    add_slices(b, dataset_name, tmp_path / "local", [50], start=300)  # block 4: the local chain is ahead

    out = tmp_path / "out.csv"
    exported = summary(run_cli("export", dataset_name, str(out), "--blocks", "1-1", "--fetch", "--json", workspace=b))
    assert exported["records"] == 100 and out.is_file()
    pulled = summary(run_cli("pull", dataset_name, "--blocks", "2-2", "--json", workspace=b))
    assert pulled["local_ahead"] and pulled["objects_transferred"] == 1  # the local head stays; block 2 came
    with Workspace(b, read_only=True) as opened:
        assert opened.selections.get(dataset_name) == Selection(slices=(SliceRange(first_block=2, last_block=2),))
        head = opened.dataset(dataset_name).require_tip()
        assert head.sequence_number == 4
    report, _ = verify_local(Workspace(b, read_only=True), dataset_name)
    assert report.ok, report.problems
    assert report.absent_slices == 1  # block 3 (block 1, fetched, is held outside the range now)
    # a push then sends block 4 and its slice: the server holds the rest
    pushed = summary(run_cli("push", dataset_name, url, "--json", workspace=b))
    assert pushed["blocks"] == 1 and pushed["objects_transferred"] == 1


def test_a_forced_pull_of_the_last_records_onto_a_rewound_remote_fetches_what_its_window_reaches(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    url = f"{smart_server.url}/{dataset_name}"
    start = add_slices(a, dataset_name, tmp_path / "in", COUNTS)
    summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    summary(run_cli("pull", url, "--json", workspace=c))
    add_slices(c, dataset_name, tmp_path / "in-c", [100, 100], start=start)
    summary(run_cli("push", dataset_name, "--json", workspace=c))  # blocks 4-5 on the remote
    summary(run_cli("pull", url, "--last", "150", "--json", workspace=b))  # holds blocks 4 and 5 only
    add_slices(a, dataset_name, tmp_path / "in-a", [50], start=start)  # another block 4: offsets 300-349
    summary(run_cli("push", dataset_name, "--force", "--json", workspace=a))  # the remote went back to a's

    pulled = summary(run_cli("pull", dataset_name, "--force", "--last", "150", "--json", workspace=b))
    assert pulled["objects_transferred"] == 2  # a's block 4, and block 3: the last 150 records (200-349) reach it
    report, _ = verify_local(Workspace(b, read_only=True), dataset_name)
    assert report.ok, report.problems
    assert report.absent_slices == 2  # blocks 1 and 2
    with open_dataset(b, dataset_name) as dataset:
        assert dataset.to_arrow(offsets=(200, 349)).num_rows == 150


def test_a_short_file_outside_the_range_is_damage_for_reads_as_for_verify(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    url = f"{smart_server.url}/{dataset_name}"
    add_slices(a, dataset_name, tmp_path / "in", COUNTS)
    summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    summary(run_cli("pull", url, "--json", workspace=b))
    summary(run_cli("pull", url, "--last", "100", "--json", workspace=b))  # blocks 1-2 held, outside the range
    held = _file_of_block(b, dataset_name, 1)
    held.write_bytes(held.read_bytes()[:10])  # short: there, but not whole

    result = run_cli("export", dataset_name, str(tmp_path / "o.csv"), "--blocks", "1-1", "--fetch", workspace=b)
    one_line_error(result, 1, "has 10 bytes instead of")  # damage: named, not fetched as if absent by choice
    assert "by choice" not in result.stderr
    found = orjson.loads(run_cli("verify", dataset_name, "--json", workspace=b).stdout)
    assert not found["ok"] and any(held.name in problem for problem in found["problems"])
