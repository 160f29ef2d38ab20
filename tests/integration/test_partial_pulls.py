"""A pull of part of the data, on both stores and both protocols: ``last`` N records, ``blocks``, ``since``
and ``state_only`` move only the slices they choose (the chain whole and verified); the workspace
records the choice (``status`` partial, ``verify`` clean); a wider pull moves only the difference and a
plain pull the rest; bad or contradicting choices, and blocks past the head, exit 2 with one line and
change nothing; a state-only workspace takes new blocks and pushes them; a push from a partial workspace
to a server that holds what it left out sends nothing of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from smart_transfer.client import SyncClient
from smart_transfer.client.inspection.holdings import holdings
from smart_transfer.client.inspection.verify import verify_local
from smart_transfer.errors import LocalError
from smart_transfer.model import NewBlock, ObjectKind, ObjectRef
from smart_transfer.model.versions import pull_selection
from smart_transfer.repo import Workspace
from smart_transfer.sync.selection import slice_facts
from tests.conftest import ServerProcess, run_cli, summary
from tests.scale import RUNTIME_FILES, commit_checkpoint, sst_names, write_checkpoint
from tests.slices import add_slices

#: Ten slices of ten records: blocks 1-10 add offsets 0-9, 10-19, ..., 90-99.
SLICES = [10] * 10


def _slices_of(workspace: Workspace, name: str) -> dict[int, ObjectRef]:
    """The data slice each block adds, by sequence number."""
    dataset = workspace.dataset(name)
    tip = dataset.require_tip()
    out = {}
    for block_hash, data in dataset.chain_blocks(0, tip.sequence_number):
        item = NewBlock.decode(data, block_hash)
        facts = slice_facts(item)
        if facts is not None:
            event = item.block.event
            new_data = event.new_data  # type: ignore[union-attr]
            out[facts.sequence_number] = ObjectRef(ObjectKind.DATA, new_data.physical_hash, new_data.size)
    return out


def _held(workspace: Workspace, name: str) -> set[int]:
    """The blocks whose slice the workspace holds."""
    slices = _slices_of(workspace, name)
    missing = set(workspace.dataset(name).objects_missing(list(slices.values())))
    return {seq for seq, ref in slices.items() if ref not in missing}


def _published(tmp_path: Path, url: str, name: str) -> None:
    """Ten slices of ten records (blocks 1-10), pushed to ``url``."""
    source = tmp_path / "source"
    add_slices(source, name, tmp_path / "files", SLICES)
    assert run_cli("push", name, url, "--json", workspace=source).returncode == 0


@pytest.mark.parametrize("protocol", ["smart", "simple"])
def test_a_partial_pull_moves_its_range_and_a_wider_one_only_the_difference(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, protocol: str
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    _published(tmp_path, url, dataset_name)
    with Workspace(tmp_path / "b") as b, SyncClient(b, protocol=protocol) as client:
        pulled = client.pull(url, last=15)  # offsets 85-99: blocks 9 (80-89) and 10 whole
        assert pulled.objects_transferred == 2 and pulled.blocks == 11
        assert _held(b, dataset_name) == {9, 10}
        assert b.selections.get(dataset_name) == pull_selection(last=15)
        report, _ = verify_local(b, dataset_name)
        assert report.ok, report.problems
        assert report.absent_objects == 8
        partial = holdings(b, dataset_name)
        assert partial is not None and partial.absent_objects == 8
        words = partial.describe(dataset_name)
        assert f"8 data slice(s) outside the chosen range; `smart-transfer pull {dataset_name}` fetches" in words

        wider = client.pull(url, blocks="7-10")
        assert (wider.objects_transferred, _held(b, dataset_name)) == (2, {7, 8, 9, 10})
        assert client.pull(url, blocks="8-").objects_transferred == 0  # narrower: nothing to move
        rest = client.pull(url)  # plain: every slice
        assert rest.objects_transferred == 6 and _held(b, dataset_name) == set(range(1, 11))
        assert holdings(b, dataset_name) is None
        again, _ = verify_local(b, dataset_name)
        assert again.ok and again.absent_objects == 0


@pytest.mark.parametrize("protocol", ["smart", "simple"])
def test_since_and_state_only_choose_by_time_and_take_no_slice(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, protocol: str
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    source = tmp_path / "source"
    add_slices(source, dataset_name, tmp_path / "files", [5, 5])
    later = add_slices(source, dataset_name, tmp_path / "files2", [5], start=10)  # a block of its own, later
    assert later == 15
    assert run_cli("push", dataset_name, url, workspace=source).returncode == 0
    with Workspace(source) as a:
        ((block_hash, data),) = a.dataset(dataset_name).chain_blocks(3, 3)
    since = NewBlock.decode(data, block_hash).block.system_time  # the later block's: its slice only
    with Workspace(tmp_path / "b") as b, SyncClient(b, protocol=protocol) as client:
        assert client.pull(url, since=since).objects_transferred == 1
        assert _held(b, dataset_name) == {3}
    with Workspace(tmp_path / "c") as c, SyncClient(c, protocol=protocol) as client:
        state = client.pull(url, state_only=True)
        assert state.objects_transferred == 0 and state.blocks == 4
        assert _held(c, dataset_name) == set()
        report, _ = verify_local(c, dataset_name)
        assert report.ok and report.absent_objects == 3


def test_a_state_only_workspace_continues_from_its_checkpoint_and_pushes(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    source = tmp_path / "source"
    add_slices(source, dataset_name, tmp_path / "files", [5, 5])
    with Workspace(source) as a:
        files = commit_checkpoint(a, dataset_name, write_checkpoint(tmp_path / "k0", [*sst_names(3), *RUNTIME_FILES]))
    assert run_cli("push", dataset_name, url, workspace=source).returncode == 0
    state = tmp_path / "state"
    assert (
        summary(run_cli("pull", url, "--state-only", "--json", workspace=state))["objects_transferred"] == files.files
    )
    # the state's owner goes on as ingest does: new records, then a new checkpoint, then a push
    add_slices(state, dataset_name, tmp_path / "files2", [5], start=10)
    with Workspace(state) as w:
        commit_checkpoint(w, dataset_name, write_checkpoint(tmp_path / "k1", [*sst_names(3, 50), *RUNTIME_FILES]))
    pushed = summary(run_cli("push", dataset_name, "--json", workspace=state))
    assert pushed["blocks"] == 2 and pushed["objects_transferred"] >= 2  # the new slice and checkpoint only
    check = tmp_path / "check"
    full = summary(run_cli("pull", url, "--json", workspace=check))
    assert full["blocks"] == 6  # the Seed, three blocks pulled state-only and two made on top
    assert run_cli("verify", dataset_name, workspace=check).returncode == 0


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--state-only", "--blocks", "1-2"],
            "--state-only (state_only=) and --blocks (blocks=) contradict each other: a pull takes one",
        ),
        (["--last", "5", "--since", "2026-01-01"], "--since (since=) and --last (last=) contradict each other"),
        (["--blocks", "5-3"], "ends before it starts"),
        (["--blocks", "x-"], "not --blocks"),
        (["--since", "2999-01-01"], "in the future"),
        (["--since", "2026-13-01"], "--since (since=) must be a date and time"),
        (["--last", "0"], "out of range"),
        (["--last", "9223372036854775808"], "out of range"),
        (["--last", "ten"], "--last (last=) must be a whole number"),
    ],
)
def test_bad_or_contradicting_choices_exit_2_and_create_nothing(
    local_server: ServerProcess, tmp_path: Path, flags: list[str], message: str
) -> None:
    workspace = tmp_path / "w"
    result = run_cli("pull", f"{local_server.url}/anything", *flags, workspace=workspace)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert not workspace.exists()


@pytest.mark.parametrize("protocol", ["smart", "simple"])
def test_blocks_past_the_head_exit_2_and_change_nothing(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, protocol: str
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    _published(tmp_path, url, dataset_name)
    workspace = tmp_path / "b"
    assert run_cli("pull", url, "--last", "5", "--protocol", protocol, workspace=workspace).returncode == 0
    with Workspace(workspace) as b:
        before = (b.dataset(dataset_name).tip(), b.selections.get(dataset_name), _held(b, dataset_name))
    result = run_cli("pull", dataset_name, "--blocks", "5-11", "--protocol", protocol, workspace=workspace)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "blocks 5-11 reach past the head (the head is block 10)" in result.stderr
    with Workspace(workspace) as b:
        assert (b.dataset(dataset_name).tip(), b.selections.get(dataset_name), _held(b, dataset_name)) == before
    fresh = tmp_path / "fresh"
    refused = run_cli("pull", url, "--blocks", "11-", "--protocol", protocol, workspace=fresh)
    assert refused.returncode == 2 and "reach past the head" in refused.stderr
    assert not fresh.exists()  # a refused first pull leaves nothing behind


@pytest.mark.parametrize("protocol", ["smart", "simple"])
def test_a_push_from_a_partial_workspace_sends_nothing_the_server_holds(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, protocol: str
) -> None:
    """The server holds files the workspace left out even where it lacks the blocks that reference them
    (a checkpoint sharing files with one it has): the push asks, sends only what the server lacks, and
    commits; a server that lacks them gets nothing committed and the one line says how to fetch them."""
    url, copy = f"{smart_server.url}/{dataset_name}", f"{smart_server.url}/{dataset_name}-copy"
    with Workspace(tmp_path / "a") as a:
        first = commit_checkpoint(
            a, dataset_name, write_checkpoint(tmp_path / "k1", [*sst_names(2), *RUNTIME_FILES], "1")
        )
        with SyncClient(a, protocol=protocol) as client:
            client.push(dataset_name, copy)  # the copy holds the first checkpoint only
        # the second: files of the first and of the third only; the third: the one a pull installs
        second = commit_checkpoint(
            a, dataset_name, write_checkpoint(tmp_path / "k2", [*sst_names(2, 1), *RUNTIME_FILES], "1")
        )
        third = commit_checkpoint(
            a, dataset_name, write_checkpoint(tmp_path / "k3", [*sst_names(2, 2), *RUNTIME_FILES], "3")
        )
        with SyncClient(a, protocol=protocol) as client:
            client.push(dataset_name, url)
    with Workspace(tmp_path / "b") as b, SyncClient(b, protocol=protocol) as client:
        client.pull(url)
        report, _ = verify_local(b, dataset_name)
        assert (
            report.ok and report.absent_objects == 6
        )  # the first checkpoint's files (the second's are its or the third's)
        pushed = client.push(dataset_name, copy)  # sends what the copy lacks: the third's files
        held = {f.physical_hash for f in first.manifest.files}
        lacking = [f for f in third.manifest.files if f.physical_hash not in held]
        assert pushed.objects_transferred == len(lacking) + second.pages + third.pages  # files and manifests
        assert client.status(dataset_name, copy).relation == "same"
        elsewhere = f"{smart_server.url}/{dataset_name}-empty"
        with pytest.raises(LocalError) as refused:
            client.push(dataset_name, elsewhere)
        message = str(refused.value)
        assert "\n" not in message and "nothing was committed" in message and "checkpoints/" in message
        assert f"`smart-transfer pull {dataset_name} --all-checkpoints`" in message
        assert client.status(dataset_name, elsewhere).relation == "remote-missing"
