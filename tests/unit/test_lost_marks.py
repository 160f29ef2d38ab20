"""A dataset's lost-objects mark: set by what finds damage, cleared only by the repair that saw it."""

from __future__ import annotations

from pathlib import Path

from smart_transfer.repo.lost import LostObjects


def test_a_mark_is_cleared_only_by_the_pull_that_saw_it(tmp_path: Path) -> None:
    lost = LostObjects(tmp_path / "lost")
    assert lost.seen("sales") is None
    lost.mark("sales")
    seen = lost.seen("sales")
    assert seen is not None
    lost.mark("sales")  # damage found while the pull ran: a new token
    lost.clear("sales", seen)
    assert lost.seen("sales") not in (None, seen)
    lost.clear("sales", lost.seen("sales") or "")
    assert lost.seen("sales") is None and sorted(p.name for p in (tmp_path / "lost").iterdir()) == []


def test_a_reader_that_may_not_write_leaves_no_mark_and_no_error(tmp_path: Path) -> None:
    blocker = tmp_path / "lost"
    blocker.write_text("a file where the directory should be")
    LostObjects(blocker).mark_quietly("sales")
    assert blocker.read_text().startswith("a file")
