"""Repositories on both stores: commits by compare-and-swap, rewrites, index rebuild, corruption."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from smart_transfer.model import (
    AddData,
    DataSlice,
    InvalidDatasetName,
    MetadataBlock,
    Multihash,
    NewBlock,
    OffsetInterval,
    SetInfo,
)
from smart_transfer.model.block import utc_now
from smart_transfer.repo import HeadMoved, ObjectKind, Repository
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.errors import CorruptRepository
from smart_transfer.repo.layout import object_key
from smart_transfer.storage.local import LocalStore


def _repository(make_store: object, tmp_path: Path, name: str = "index") -> Repository:
    return Repository(make_store(), tmp_path / name)  # type: ignore[operator]


def _add_data(dataset: DatasetRepository, payload: bytes, records: int = 3) -> None:
    tip = dataset.tip()
    start = tip.next_offset if tip is not None else 0
    digest = Multihash.of(payload)
    dataset.store.put(object_key(dataset.name, ObjectKind.DATA, digest), payload)
    dataset.append([AddData(DataSlice(digest, len(payload), OffsetInterval(start, start + records - 1), records))])


def test_append_creates_a_seeded_chain(make_store: object, tmp_path: Path) -> None:
    with _repository(make_store, tmp_path) as repo:
        dataset = repo.dataset("numbers")
        assert dataset.tip() is None
        _add_data(dataset, b"one")
        _add_data(dataset, b"two")
        tip = dataset.require_tip()
        assert tip.sequence_number == 2
        assert tip.next_offset == 6
        assert dataset.head() == tip.head
        assert list(repo.dataset_names()) == ["numbers"]
        hashes = [h for h, _ in dataset.blocks_after(tip, None)]
        assert len(hashes) == 3
        assert [h for h, _ in dataset.blocks_after(tip, hashes[0])] == hashes[1:]


def test_commit_from_a_stale_head_is_refused_and_changes_nothing(make_store: object, tmp_path: Path) -> None:
    with _repository(make_store, tmp_path) as repo:
        dataset = repo.dataset("d")
        _add_data(dataset, b"one")
        old = dataset.require_tip()
        _add_data(dataset, b"two")
        current = dataset.require_tip()
        stale = NewBlock.of(MetadataBlock(old.sequence_number + 1, old.head, utc_now(), SetInfo("late")))
        with pytest.raises(HeadMoved) as caught:
            dataset.commit(old.head, old, [stale])
        assert caught.value.actual == str(current.head)
        assert dataset.head() == current.head


def test_two_repositories_racing_on_one_store_have_one_winner(make_store: object, tmp_path: Path) -> None:
    first = _repository(make_store, tmp_path, "index-a")
    second = _repository(make_store, tmp_path, "index-b")
    try:
        _add_data(first.dataset("race"), b"base")
        base = second.dataset("race").require_tip()
        results: dict[str, str] = {}
        barrier = threading.Barrier(2)

        def push(repo: Repository, label: str) -> None:
            block = NewBlock.of(MetadataBlock(base.sequence_number + 1, base.head, utc_now(), SetInfo(label)))
            barrier.wait()
            try:
                repo.dataset("race").commit(base.head, base, [block])
                results[label] = "won"
            except HeadMoved:
                results[label] = "lost"

        threads = [threading.Thread(target=push, args=(r, label)) for r, label in ((first, "a"), (second, "b"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(results.values()) == ["lost", "won"]
        # both indexes converge on the winner's chain
        assert first.dataset("race").require_tip() == second.dataset("race").require_tip()
        assert first.dataset("race").require_tip().sequence_number == base.sequence_number + 1
    finally:
        first.close()
        second.close()


def test_index_is_rebuilt_from_the_store(make_store: object, tmp_path: Path) -> None:
    with _repository(make_store, tmp_path, "index-1") as repo:
        dataset = repo.dataset("rebuild")
        for i in range(5):
            _add_data(dataset, f"part {i}".encode())
        tip = dataset.require_tip()
    with _repository(make_store, tmp_path, "index-2") as fresh:
        rebuilt = fresh.dataset("rebuild")
        assert rebuilt.require_tip() == tip
        assert len(list(rebuilt.blocks_after(tip, None))) == 6


def _rewrite_after_block_1(dataset: DatasetRepository) -> tuple[list[Multihash], NewBlock]:
    """Rewrite ``dataset``'s history from block 1 (a force): every later block is replaced by one other
    block. Returns the old chain's block hashes and the new block."""
    tip = dataset.require_tip()
    hashes = [h for h, _ in dataset.blocks_after(tip, None)]
    base = dataset.chain_tip_at(hashes[1])
    assert base is not None
    other = NewBlock.of(MetadataBlock(2, hashes[1], utc_now(), SetInfo("rewritten")))
    dataset.commit(tip.head, base, [other])
    return hashes, other


def test_index_follows_a_rewrite_made_elsewhere(make_store: object, tmp_path: Path) -> None:
    with _repository(make_store, tmp_path, "index-a") as a, _repository(make_store, tmp_path, "index-b") as b:
        _add_data(a.dataset("rw"), b"one")
        _add_data(a.dataset("rw"), b"two")
        _add_data(a.dataset("rw"), b"three")
        seen_by_b = b.dataset("rw").require_tip()
        assert seen_by_b.sequence_number == 3
        # a rewrites history from block 1 (force): blocks 2 and 3 are replaced by one other block
        hashes, other = _rewrite_after_block_1(a.dataset("rw"))
        after = b.dataset("rw").require_tip()
        assert after.head == other.hash
        assert after.sequence_number == 2
        assert [h for h, _ in b.dataset("rw").blocks_after(after, None)] == [*hashes[:2], other.hash]


def test_a_rewrite_keeps_claiming_objects_a_kept_block_references(make_store: object, tmp_path: Path) -> None:
    # block 2 adds the same bytes block 1 did; a rewrite from block 1 replaces block 2: the object is
    # still block 1's, so the index must still call it committed (pulls are planned from that answer)
    with _repository(make_store, tmp_path) as repo:
        dataset = repo.dataset("reuse")
        _add_data(dataset, b"shared bytes")
        _add_data(dataset, b"shared bytes")
        _add_data(dataset, b"replaced only")
        _rewrite_after_block_1(dataset)
        assert dataset.committed(ObjectKind.DATA, Multihash.of(b"shared bytes"))
        assert not dataset.committed(ObjectKind.DATA, Multihash.of(b"replaced only"))


def test_a_corrupted_stored_pack_is_reported(make_store: object, tmp_path: Path) -> None:
    store = make_store()  # type: ignore[operator]
    with Repository(store, tmp_path / "index-a") as repo:
        dataset = repo.dataset("corrupt")
        _add_data(dataset, b"one")
        (pack,) = dataset.blocks.packs()
        data = store.get(pack.key)
        store.put(pack.key, data[:-2] + b"}}")  # same size, other bytes
    with (
        Repository(make_store(), tmp_path / "index-b") as fresh,
        pytest.raises(CorruptRepository, match="does not match its hash"),
    ):  # type: ignore[operator]
        fresh.dataset("corrupt").tip()


@pytest.mark.parametrize("name", ["..", "a/b", "/etc", "%2e%2e", "a\0"])
def test_bad_dataset_names_are_refused(tmp_path: Path, name: str) -> None:
    with Repository(LocalStore(tmp_path / "s"), tmp_path / "i") as repo, pytest.raises(InvalidDatasetName):
        repo.dataset(name)
