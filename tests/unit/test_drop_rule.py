"""What a drop may delete (sync/drop.py) and the selection it records (client/flows/drop.py
``drop_selection``): objects the narrower selection leaves out, never those of blocks after the remote
head (a later push needs them), never the latest checkpoint's files, a file a kept checkpoint shares
neither; what is not named stays as recorded; nothing named, or two ranges, is refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from smart_transfer.client.flows.drop import drop_selection
from smart_transfer.errors import LocalError
from smart_transfer.model import Multihash, NewBlock, ObjectKind, ObjectRef
from smart_transfer.model.manifest import CheckpointManifest
from smart_transfer.model.selection import DEFAULT, EVERYTHING, Selection, SliceRange
from smart_transfer.sync.drop import droppable
from smart_transfer.sync.selection import ChainView, split_objects
from tests.unit.test_selection import _chain, _labels, _manifest, _slice


def _going(
    blocks: list[NewBlock],
    manifests: dict[Multihash, CheckpointManifest],
    latest: Multihash | None,
    selection: Selection,
    next_offset: int,
    pushed_through: int,
) -> list[ObjectRef]:
    return droppable(ChainView(blocks, manifests, latest, next_offset, pushed_through + 1), selection).going


def test_a_drop_deletes_what_the_range_leaves_out_up_to_the_remote_head_only() -> None:
    blocks = _chain([10, 10, 10, 10, 10])
    last = Selection(slices=(SliceRange(records=10),))
    assert _labels(_going(blocks, {}, None, last, 50, pushed_through=5)) == {_slice(s) for s in (1, 2, 3, 4)}
    # blocks 4 and 5 are not pushed yet: their slices stay whatever the range says
    assert _labels(_going(blocks, {}, None, last, 50, pushed_through=3)) == {_slice(s) for s in (1, 2, 3)}
    kept = droppable(ChainView(blocks, {}, None, 50, 4), last).kept_for_push
    assert _labels(kept) == {_slice(4)}
    assert _going(blocks, {}, None, Selection(), 50, pushed_through=5) == []


def test_a_drop_of_older_checkpoints_keeps_the_latest_and_what_it_shares() -> None:
    old = _manifest("000001.sst", "000002.sst", "CURRENT")
    new = _manifest("000002.sst", "000003.sst", "CURRENT")
    blocks = _chain([5, 5], {1: old, 2: new})
    manifests = {old.hash(): old, new.hash(): new}
    going = _going(blocks, manifests, new.hash(), DEFAULT, 10, pushed_through=2)
    assert {ref.kind for ref in going} == {ObjectKind.CHECKPOINT}
    assert _labels(going) == {old.files[0].physical_hash}  # 000001.sst; CURRENT is the same file in both: shared
    # the newest checkpoint unpushed: an older one's files may go, its own never
    assert _going(blocks, manifests, new.hash(), DEFAULT, 10, pushed_through=1) == going


@given(
    st.lists(st.integers(0, 5), min_size=1, max_size=8),
    st.integers(1, 40),
    st.integers(0, 8),
)
def test_a_drop_never_deletes_what_its_selection_wants_or_an_unpushed_block_references(
    counts: list[int], records: int, pushed: int
) -> None:
    blocks = _chain(counts)
    pushed = min(pushed, len(counts))
    selection = Selection(slices=(SliceRange(records=records),))
    going = _labels(_going(blocks, {}, None, selection, sum(counts), pushed))
    assert not going & _labels(split_objects(ChainView(blocks, {}, None, sum(counts)), selection).wanted)
    assert not going & {_slice(seq) for seq in range(pushed + 1, len(counts) + 1)}


def test_what_a_drop_records_replaces_the_named_part_only() -> None:
    ranged = Selection(checkpoints="all", slices=(SliceRange(first_block=3),))
    assert drop_selection(ranged, last=100) == Selection("all", (SliceRange(records=100),))
    assert drop_selection(ranged, older_checkpoints=True) == Selection("latest", ranged.slices)
    assert drop_selection(EVERYTHING, state_only=True, older_checkpoints=True) == Selection("latest", ())
    assert drop_selection(DEFAULT, blocks="2-4") == Selection(slices=(SliceRange(first_block=2, last_block=4),))


@pytest.mark.parametrize(
    ("choice", "fragment"),
    [
        ({}, "say what to keep"),
        ({"last": 5, "blocks": "1-2"}, "contradict each other: a drop takes one range"),
        ({"blocks": "5-2"}, "ends before it starts"),
        ({"last": 0}, r"--last \(last=\) must be"),
        ({"since": "2999-01-01"}, "in the future"),
    ],
)
def test_a_bad_drop_choice_is_a_usage_error(choice: dict[str, object], fragment: str) -> None:
    with pytest.raises(LocalError, match=fragment) as caught:
        drop_selection(DEFAULT, **choice)  # type: ignore[arg-type]
    assert caught.value.code.value == "InvalidRequest"
