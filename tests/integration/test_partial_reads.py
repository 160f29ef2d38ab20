"""Reads of a partial workspace, on both stores: ``tail``, ``export``, ``diff`` and the SDK's readers read
what is present; asked for slices left out by choice they fail with one line naming the blocks and the
pull that gets them (exit 2, nothing changed), or, with ``--fetch`` / ``fetch=True``, fetch just those
slices (a pull with the recorded selection widened: verified, stored, recorded). A lost slice is still
called lost, never absent by choice."""

from __future__ import annotations

from pathlib import Path

import pytest

from smart_transfer.client import SyncClient, open_dataset
from smart_transfer.client.inspection.verify import verify_local
from smart_transfer.model.selection import Selection, SliceRange
from smart_transfer.reading.absent import AbsentByChoice
from smart_transfer.repo import Workspace
from tests.conftest import ServerProcess, run_cli, summary
from tests.integration.test_read import one_line_error, tail
from tests.slices import add_slices

#: Five slices of 100 records: blocks 1-5 (the Seed is block 0), offsets 0-499.
COUNTS = [100, 100, 100, 100, 100]
LAST_SLICE = Selection(slices=(SliceRange(records=100),))


def _partial(server: ServerProcess, name: str, tmp_path: Path, selection: Selection) -> tuple[Path, str]:
    """Workspace ``b`` holding ``selection`` of a dataset of COUNTS pushed from workspace ``a``."""
    a, b = tmp_path / "a", tmp_path / "b"
    url = f"{server.url}/{name}"
    add_slices(a, name, tmp_path / "in", COUNTS)
    summary(run_cli("push", name, url, "--json", workspace=a))
    with SyncClient(b) as client:
        client.pull(url, selection=selection)
    return b, url


def _slices_missing(workspace: Path, name: str) -> int:
    """How many of the dataset's data slices the workspace does not hold."""
    with open_dataset(workspace, name) as dataset:
        refs = [entry.ref for entry in dataset.slices()]
        return len(dataset.workspace.dataset(name).objects_missing(refs))


def test_reads_of_a_partial_workspace_name_what_is_absent_and_fetch_it_when_asked(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    b, _ = _partial(smart_server, dataset_name, tmp_path, LAST_SLICE)
    assert _slices_missing(b, dataset_name) == 4
    # the last records are present: tail reads them
    assert [r["offset"] for r in tail(b, dataset_name, "-n", "3")] == [497, 498, 499]

    before = b.joinpath("selections").exists(), _slices_missing(b, dataset_name)
    result = run_cli("tail", dataset_name, "-n", "150", workspace=b)
    one_line_error(result, 2, f"{dataset_name}: block 4 (offsets 300-399) absent by choice")
    # the way out never replaces the recorded range: a fetch on the read, or a pull of every slice
    assert f"read with --fetch (SDK: fetch=) to get them, or `smart-transfer pull {dataset_name}` for every" in (
        result.stderr
    )
    out = tmp_path / "out"
    out.mkdir()
    everything = run_cli("export", dataset_name, str(out / "all.csv"), workspace=b)
    one_line_error(everything, 2, "blocks 1-4 (offsets 0-399) absent by choice")
    assert "--blocks" not in everything.stderr
    assert list(out.iterdir()) == []  # nothing written
    with Workspace(b, read_only=True) as opened:
        assert opened.selections.get(dataset_name) == LAST_SLICE  # nothing changed
    assert (b.joinpath("selections").exists(), _slices_missing(b, dataset_name)) == before

    # --fetch: just the slices of the range move, and the record widens
    fetched = summary(
        run_cli("export", dataset_name, str(out / "b2.jsonl"), "--blocks", "2-2", "--fetch", "--json", workspace=b)
    )
    assert fetched["records"] == 100 and _slices_missing(b, dataset_name) == 3
    with Workspace(b, read_only=True) as opened:
        assert opened.selections.get(dataset_name) == LAST_SLICE.union(
            Selection(slices=(SliceRange(first_block=2, last_block=2),))
        )
    report, _ = verify_local(Workspace(b, read_only=True), dataset_name)
    assert report.ok, report.problems
    assert report.absent_objects == 3

    # the SDK: AbsentByChoice names what a fetch gets; fetch=True gets it
    with pytest.raises(AbsentByChoice) as caught, open_dataset(b, dataset_name) as dataset:
        dataset.to_arrow()
    assert caught.value.wanted == Selection(slices=(SliceRange(first_block=1, last_block=4),))
    assert [(r.first_block, r.last_block) for r in caught.value.runs] == [(1, 1), (3, 4)]
    with SyncClient(b) as client:
        with pytest.raises(AbsentByChoice):
            client.dataset(dataset_name).files(blocks=(1, 1))
        table = client.dataset(dataset_name, fetch=True).to_arrow()
    assert table.column("offset").to_pylist() == list(range(500))
    assert _slices_missing(b, dataset_name) == 0
    whole, _ = verify_local(Workspace(b, read_only=True), dataset_name)
    assert whole.ok and whole.absent_objects == 0


def test_diff_of_a_state_only_workspace_fetches_the_footer_it_needs_when_asked(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    b, _ = _partial(smart_server, dataset_name, tmp_path, Selection(slices=()))
    assert _slices_missing(b, dataset_name) == 5
    # no SetDataSchema: the schema at a version is its newest slice's footer, absent here
    result = run_cli("diff", dataset_name, "1", "2", workspace=b)
    one_line_error(result, 2, "block 1 (offsets 0-99) absent by choice")
    assert _slices_missing(b, dataset_name) == 5
    fetched = summary(run_cli("diff", dataset_name, "1", "2", "--fetch", "--json", workspace=b))
    assert fetched["records"] == 100 and (fetched["schema_source_before"], fetched["schema_source_after"]) == (
        "footer",
        "footer",
    )
    assert _slices_missing(b, dataset_name) == 3  # blocks 1 and 2: the footers of both versions
    report, _ = verify_local(Workspace(b, read_only=True), dataset_name)
    assert report.ok and report.absent_objects == 3
    # the SDK compares alike (the decision is the reader's, not the command's): absent, or fetched
    with pytest.raises(AbsentByChoice, match="block 3"), open_dataset(b, dataset_name) as dataset:
        dataset.compare("2", "3")
    with SyncClient(b) as client:
        compared = client.dataset(dataset_name, fetch=True).compare("2", "3")
    assert compared.to_dict()["records"] == 100 and _slices_missing(b, dataset_name) == 2


def test_a_lost_slice_is_still_lost_in_a_partial_workspace(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    b, _ = _partial(smart_server, dataset_name, tmp_path, LAST_SLICE)
    with open_dataset(b, dataset_name) as dataset:
        [last] = dataset.files(blocks=(5, 5))
    last.unlink()  # wanted by the selection, gone: lost
    result = run_cli("tail", dataset_name, "-n", "1", "--fetch", workspace=b)
    one_line_error(result, 1, "is missing from the workspace")
    assert "by choice" not in result.stderr
    assert _slices_missing(b, dataset_name) == 5  # --fetch never fetched a lost slice as if absent
