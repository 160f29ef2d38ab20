"""The store-level reader of the last records (repo/rows.py, the web view's preview): the same rows as
the workspace's LocalDataset.tail, read by byte ranges within a bound, and a clear error past it."""

from __future__ import annotations

from pathlib import Path

import pytest

from smart_transfer.reading.dataset import LocalDataset
from smart_transfer.repo import Workspace
from smart_transfer.repo.rows import ReadBudget, ReadBudgetExceeded, tail_from_store
from tests.slices import add_slices


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("rows")
    add_slices(root / "ws", "sales", root / "in", [30, 30, 7], row_group_size=8)
    return root / "ws"


@pytest.mark.parametrize("count", [0, 1, 5, 7, 8, 20, 40, 67, 100])
def test_the_stores_tail_is_the_workspaces_tail(workspace: Path, count: int) -> None:
    with Workspace(workspace, read_only=True) as opened:
        dataset = opened.dataset("sales")
        tip = dataset.require_tip()
        seen: list[int] = []
        budget = ReadBudget(1 << 20)
        rows = tail_from_store(dataset, tip, count, budget, seen.append)
        expected = LocalDataset(opened, "sales").tail(count)
    assert rows.to_pylist() == expected.to_pylist()
    assert len(rows) == min(count, 67)
    assert seen == [budget.spent] and budget.spent > 0


def test_a_read_past_its_budget_stops_with_a_clear_error(workspace: Path) -> None:
    with Workspace(workspace, read_only=True) as opened:
        dataset = opened.dataset("sales")
        seen: list[int] = []
        budget = ReadBudget(64)
        with pytest.raises(ReadBudgetExceeded, match="64 bytes"):
            tail_from_store(dataset, dataset.require_tip(), 5, budget, seen.append)
    assert seen == [budget.spent] and budget.spent <= 64


def test_blocks_without_data_after_the_last_slice_change_nothing(tmp_path: Path) -> None:
    from smart_transfer.model import AddData

    add_slices(tmp_path / "ws", "tailing", tmp_path / "in", [12, 9], row_group_size=4)
    with Workspace(tmp_path / "ws") as opened:
        opened.dataset("tailing").append([AddData(new_watermark="2024-01-01T00:00:00Z")] * 50)
    with Workspace(tmp_path / "ws", read_only=True) as opened:
        dataset = opened.dataset("tailing")
        rows = tail_from_store(dataset, dataset.require_tip(), 11, ReadBudget(1 << 20), lambda _: None)
        assert rows.to_pylist() == LocalDataset(opened, "tailing").tail(11).to_pylist()
    assert rows.column("offset").to_pylist() == list(range(10, 21))
