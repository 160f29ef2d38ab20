"""A dataset's lost-objects marks: set by what finds damage, cleared only by the repair that saw them."""

from __future__ import annotations

from pathlib import Path

from smart_transfer.repo.lost import LostObjects


def test_a_mark_is_cleared_only_by_the_pull_that_saw_it(tmp_path: Path) -> None:
    lost = LostObjects(tmp_path / "lost")
    assert lost.seen("sales") == frozenset()
    lost.mark("sales")
    seen = lost.seen("sales")
    assert len(seen) == 1
    lost.mark("sales")  # damage found while the pull ran: a mark of its own
    lost.clear("sales", seen)
    left = lost.seen("sales")
    assert len(left) == 1 and not left & seen
    lost.clear("sales", left)
    assert lost.seen("sales") == frozenset() and lost.seen("other") == frozenset()


def test_a_reader_that_may_not_write_leaves_no_mark_and_no_error(tmp_path: Path) -> None:
    blocker = tmp_path / "lost"
    blocker.write_text("a file where the directory should be")
    assert LostObjects(blocker).mark_quietly("sales") is False
    assert blocker.read_text().startswith("a file") and LostObjects(blocker).seen("sales") == frozenset()
