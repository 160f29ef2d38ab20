"""Which objects a selection wants (sync/selection.py), the record of it (repo/selection.py) and how the
command line and the SDK write one (model/versions.py ``pull_selection``): the latest checkpoint's files,
or every checkpoint's; manifests and their pages always; a file a wanted checkpoint shares is never left
out; data slices by blocks, system time or the last N records (a slice with any of them counts whole),
or none; a record that cannot be read refuses; bad or contradicting choices are refused."""

from __future__ import annotations

import inspect
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from smart_transfer.config.values import LONG_MAX, BadValue
from smart_transfer.model import Multihash, NewBlock, ObjectRef
from smart_transfer.model.block import MetadataBlock
from smart_transfer.model.events import AddData, Checkpoint, DataSlice, OffsetInterval, Seed
from smart_transfer.model.manifest import CheckpointFile, CheckpointManifest, build_manifest
from smart_transfer.model.selection import DEFAULT, EVERYTHING, InvalidSelection, Selection, SliceRange
from smart_transfer.model.versions import pull_selection
from smart_transfer.repo import RepositoryError
from smart_transfer.repo.selection import SelectionRecords
from smart_transfer.sync.selection import ChainView, ObjectSplit, range_past_head, split_objects

#: Block i's system time: a day after the one before it.
_DAY0 = datetime(2026, 1, 1, tzinfo=UTC)


def _file(name: str) -> CheckpointFile:
    data = name.encode()
    return CheckpointFile(name, Multihash.of(data), len(data), name.endswith(".sst"))


def _manifest(*names: str) -> CheckpointManifest:
    return build_manifest([_file(n) for n in names])


def _chain(slices: list[int], checkpoints: dict[int, CheckpointManifest] | None = None) -> list[NewBlock]:
    """A Seed, then one AddData block per entry of ``slices`` (that many records; 0: no slice), block
    ``i`` at day ``i`` after ``_DAY0``, with the checkpoint ``checkpoints[i]`` when given."""
    checkpoints = checkpoints or {}
    prev = None
    out = [NewBlock.of(MetadataBlock(0, prev, _time(0), Seed("did:odf:f" + "cd" * 16)))]
    offset = 0
    for seq, count in enumerate(slices, start=1):
        data = None
        if count:
            data = DataSlice(
                Multihash.of(f"slice {seq}".encode()), 100, OffsetInterval(offset, offset + count - 1), count
            )
            offset += count
        manifest = checkpoints.get(seq)
        checkpoint = Checkpoint(manifest.hash(), len(manifest.encode())) if manifest is not None else None
        out.append(NewBlock.of(MetadataBlock(seq, out[-1].hash, _time(seq), AddData(data, checkpoint))))
    return out


def _time(day: int) -> str:
    return (_DAY0 + timedelta(days=day)).isoformat().replace("+00:00", "Z")


def _slice(seq: int) -> Multihash:
    return Multihash.of(f"slice {seq}".encode())


def _labels(refs: list[ObjectRef]) -> set[Multihash]:
    return {ref.physical_hash for ref in refs}


def _split(
    blocks: list[NewBlock],
    manifests: dict[Multihash, CheckpointManifest],
    latest: Multihash | None,
    selection: Selection,
    next_offset: int | None = None,
    unpushed_from: int | None = None,
) -> ObjectSplit:
    return split_objects(ChainView(blocks, manifests, latest, next_offset, unpushed_from), selection)


def _wanted_slices(blocks: list[NewBlock], selection: Selection) -> set[int]:
    wanted = _labels(_split(blocks, {}, None, selection).wanted)
    return {seq for seq in range(1, len(blocks)) if _slice(seq) in wanted}


def test_only_the_latest_checkpoints_files_are_wanted_and_shared_files_never_left_out() -> None:
    old = _manifest("000001.sst", "000002.sst", "CURRENT")
    new = _manifest("000002.sst", "000003.sst", "CURRENT")
    blocks = _chain([5, 5], {1: old, 2: new})
    manifests = {old.hash(): old, new.hash(): new}
    split = _split(blocks, manifests, new.hash(), Selection())
    shared = {Multihash.of(b"000002.sst"), Multihash.of(b"CURRENT")}
    assert _labels(split.left_out) == {Multihash.of(b"000001.sst")}
    assert {_slice(1), _slice(2), old.hash(), new.hash()} | shared <= _labels(split.wanted)
    assert Multihash.of(b"000003.sst") in _labels(split.wanted)
    everything = _split(blocks, manifests, new.hash(), EVERYTHING)
    assert everything.left_out == [] and _labels(everything.wanted) == _labels(split.wanted) | _labels(split.left_out)


def test_without_a_checkpoint_nothing_is_left_out() -> None:
    assert _split(_chain([5]), {}, None, Selection()).left_out == []


def test_state_only_wants_no_slice_but_the_latest_checkpoint_and_every_manifest() -> None:
    old, new = _manifest("000001.sst", "CURRENT"), _manifest("000002.sst", "CURRENT")
    blocks = _chain([5, 5, 5], {1: old, 3: new})
    split = _split(blocks, {old.hash(): old, new.hash(): new}, new.hash(), pull_selection(state_only=True))
    assert _labels(split.left_out) == {_slice(1), _slice(2), _slice(3), Multihash.of(b"000001.sst")}
    assert {old.hash(), new.hash(), Multihash.of(b"000002.sst"), Multihash.of(b"CURRENT")} == _labels(split.wanted)


def test_a_range_of_blocks_wants_the_slices_those_blocks_added() -> None:
    blocks = _chain([5, 0, 5, 5, 5])
    assert _wanted_slices(blocks, pull_selection(blocks="2-4")) == {3, 4}
    assert _wanted_slices(blocks, pull_selection(blocks="4-")) == {4, 5}
    assert _wanted_slices(blocks, pull_selection(blocks=(None, 1))) == {1}
    assert _wanted_slices(blocks, pull_selection(blocks="3")) == {3}


def test_since_wants_the_slices_of_blocks_at_or_after_that_time() -> None:
    blocks = _chain([5, 5, 5, 5])
    assert _wanted_slices(blocks, pull_selection(since=_time(3))) == {3, 4}
    assert _wanted_slices(blocks, pull_selection(since=_DAY0 + timedelta(days=2, microseconds=1))) == {3, 4}
    assert _wanted_slices(blocks, pull_selection(since="2026-01-03")) == {2, 3, 4}  # a day: its midnight, UTC
    assert _wanted_slices(blocks, pull_selection(since="2026-01-03T01:00:00+02:00")) == {2, 3, 4}
    # finer than a microsecond rounds down, as a block's time is cut: a block written at that moment (its
    # time to the microsecond) is "at or after" it
    assert _wanted_slices(blocks, pull_selection(since=_time(3)[:-1] + ".0000001Z")) == {3, 4}


def test_the_last_n_records_want_every_slice_holding_any_of_them() -> None:
    blocks = _chain([10, 10, 10])  # offsets 0-9, 10-19, 20-29
    assert _wanted_slices(blocks, pull_selection(last=1)) == {3}
    assert _wanted_slices(blocks, pull_selection(last=10)) == {3}
    assert _wanted_slices(blocks, pull_selection(last=11)) == {2, 3}
    assert _wanted_slices(blocks, pull_selection(last=LONG_MAX)) == {1, 2, 3}
    # counted back from the head's next offset when the blocks are only part of the chain
    tail = blocks[2:]
    assert _labels(_split(tail, {}, None, pull_selection(last=5), next_offset=40).wanted) == set()


@given(st.lists(st.integers(0, 20), min_size=1, max_size=12), st.integers(1, 300), st.integers(0, 14))
def test_what_is_wanted_and_what_is_left_out_make_everything(slices: list[int], last: int, day: int) -> None:
    blocks = _chain(slices)
    every = _labels(_split(blocks, {}, None, EVERYTHING).wanted)
    for selection in (pull_selection(last=last), pull_selection(since=_time(day)), pull_selection(state_only=True)):
        split = _split(blocks, {}, None, selection)
        assert _labels(split.wanted) | _labels(split.left_out) == every
        assert not _labels(split.wanted) & _labels(split.left_out)


@given(st.lists(st.integers(0, 20), min_size=1, max_size=12), st.integers(1, 300), st.integers(0, 300))
def test_a_wider_selection_never_leaves_out_more(slices: list[int], last: int, more: int) -> None:
    blocks = _chain(slices)
    narrow, wide = pull_selection(last=last), pull_selection(last=last + more)
    left_narrow = _labels(_split(blocks, {}, None, narrow).left_out)
    left_wide = _labels(_split(blocks, {}, None, wide).left_out)
    assert left_wide <= left_narrow
    union = narrow.union(pull_selection(blocks="1-2"))
    assert _labels(_split(blocks, {}, None, union).left_out) <= left_narrow
    assert _labels(_split(blocks, {}, None, DEFAULT).left_out) == set()


def test_the_narrower_selection_is_the_one_both_hold_everything_of() -> None:
    latest = Selection()
    assert latest.narrower(EVERYTHING) == latest and EVERYTHING.narrower(latest) == latest
    assert EVERYTHING.narrower(EVERYTHING) == EVERYTHING
    last = pull_selection(last=5)
    assert last.narrower(DEFAULT) == last and DEFAULT.narrower(last) == last
    assert last.narrower(pull_selection(blocks="1-2")).slices == ()  # two forms: none surely held by both
    assert last.union(DEFAULT) == DEFAULT
    assert last.union(pull_selection(state_only=True)) == last


def test_a_range_past_the_head_is_named() -> None:
    assert range_past_head(pull_selection(blocks="3-9"), 9) is None
    assert range_past_head(pull_selection(blocks="3-"), 9) is None
    assert range_past_head(pull_selection(last=5), 0) is None
    reason = range_past_head(pull_selection(blocks="3-10"), 9)
    assert reason is not None and "3-10" in reason and "block 9" in reason
    assert range_past_head(pull_selection(blocks="10-"), 9) is not None
    assert range_past_head(pull_selection(blocks="0-0"), None) is not None


@pytest.mark.parametrize(
    ("choice", "message"),
    [
        ({"state_only": True, "blocks": "1-2"}, r"--state-only \(state_only=\) and --blocks \(blocks=\) contradict"),
        (
            {"blocks": "1-2", "last": "5"},
            r"--blocks \(blocks=\) and --last \(last=\) contradict each other: a pull",
        ),
        ({"since": "2026-01-01", "last": 5}, r"--since \(since=\) and --last \(last=\) contradict"),
        ({"blocks": "5-3"}, "ends before it starts"),
        ({"blocks": "x"}, "not --blocks"),
        ({"blocks": (3, 1)}, "ends before it starts"),
        ({"blocks": (-1, None)}, "whole numbers from 0"),
        ({"since": "yesterday"}, r"--since \(since=\) must be a date and time"),
        ({"since": "2026-02-30"}, r"--since \(since=\) must be a date and time"),
        ({"since": "2999-01-01"}, "in the future"),
        ({"since": datetime(2026, 1, 1)}, "must name its zone"),
        ({"last": "0"}, "out of range"),
        ({"last": str(LONG_MAX + 1)}, "out of range"),
        ({"last": "1.5"}, r"--last \(last=\) must be a whole number"),
        ({"last": 0}, r"--last \(last=\) must be a whole number from 1"),
        ({"last": True}, r"--last \(last=\) must be a whole number from 1"),
    ],
)
def test_bad_or_contradicting_choices_are_refused(choice: dict[str, object], message: str) -> None:
    with pytest.raises(BadValue, match=message):
        pull_selection(**choice)  # type: ignore[arg-type]


def test_the_flags_make_one_selection() -> None:
    assert pull_selection() == DEFAULT
    assert pull_selection(all_checkpoints=True) == EVERYTHING
    assert pull_selection(state_only=True, all_checkpoints=True) == Selection("all", ())
    assert pull_selection(last=" 7 ") == Selection(slices=(SliceRange(records=7),))
    assert pull_selection(since="2026-01-01T00:00:00Z", now_micros=1_767_225_600_000_000) == Selection(
        slices=(SliceRange(since=1_767_225_600_000_000),)
    )
    with pytest.raises(BadValue, match="in the future"):
        pull_selection(since="2026-01-01T00:00:00.000001Z", now_micros=1_767_225_600_000_000)


def test_a_record_is_kept_replaced_and_refused_when_unreadable(tmp_path: Path) -> None:
    records = SelectionRecords(tmp_path / "selection")
    assert records.get("ds") == EVERYTHING  # no record: a workspace from before selections holds everything
    records.set("ds", Selection())
    assert records.get("ds") == Selection() and records.get("other") == EVERYTHING
    records.set("ds", pull_selection(last=3))
    assert records.get("ds") == pull_selection(last=3)
    records.set("ds", EVERYTHING)
    assert records.get("ds") == EVERYTHING
    assert sorted(p.name for p in (tmp_path / "selection").iterdir()) == ["ds"]  # no staged file left
    (tmp_path / "selection" / "ds").write_bytes(b'{"checkpoints": "some"}')
    with pytest.raises(RepositoryError, match="not a selection record"):
        records.get("ds")


def test_the_narrower_of_two_ranges_of_one_form_is_their_overlap() -> None:
    # a pull that changes its range (and is killed) records what both hold: not nothing, so a loss inside
    # the common range is still called lost
    def blocks(first: int | None, last: int | None) -> Selection:
        return Selection(slices=(SliceRange(first_block=first, last_block=last),))

    assert blocks(1, 5).narrower(blocks(3, 9)) == blocks(3, 5)
    assert blocks(None, 5).narrower(blocks(3, None)) == blocks(3, 5)
    assert blocks(1, 2).narrower(blocks(4, 9)).slices == ()  # they do not meet
    assert pull_selection(last=5).narrower(pull_selection(last=9)) == pull_selection(last=5)
    early, late = Selection(slices=(SliceRange(since=10),)), Selection(slices=(SliceRange(since=20),))
    assert early.narrower(late) == late and late.narrower(early) == late
    assert blocks(None, None).narrower(pull_selection(last=5)) == pull_selection(last=5)
    two = Selection(slices=(SliceRange(first_block=1, last_block=2), SliceRange(first_block=6, last_block=8)))
    assert two.narrower(blocks(2, 7)) == Selection(
        slices=(SliceRange(first_block=2, last_block=2), SliceRange(first_block=6, last_block=7))
    )


@given(
    st.lists(st.integers(0, 20), min_size=1, max_size=10),
    st.tuples(st.integers(0, 10), st.integers(0, 10)),
    st.tuples(st.integers(0, 10), st.integers(0, 10)),
)
def test_the_narrower_selection_wants_only_what_both_want(
    slices: list[int], one: tuple[int, int], other: tuple[int, int]
) -> None:
    blocks = _chain(slices)
    a = pull_selection(blocks=(min(one), max(one)))
    b = pull_selection(blocks=(min(other), max(other)))
    both = _wanted_slices(blocks, a) & _wanted_slices(blocks, b)
    assert _wanted_slices(blocks, a.narrower(b)) == both


def test_the_objects_of_blocks_no_remote_holds_are_always_wanted() -> None:
    # after a state-only pull, new local blocks (3 and 4 here, after the remote head at block 2) exist
    # nowhere else: a missing one is lost, never absent by choice, and never dropped
    old, new = _manifest("000001.sst", "CURRENT"), _manifest("000002.sst", "CURRENT")
    blocks = _chain([5, 5, 5, 5], {1: old, 3: new})
    manifests = {old.hash(): old, new.hash(): new}
    state_only = pull_selection(state_only=True)
    split = _split(blocks, manifests, new.hash(), state_only, unpushed_from=3)
    assert _labels(split.left_out) == {_slice(1), _slice(2), Multihash.of(b"000001.sst")}
    assert {_slice(3), _slice(4)} <= _labels(split.wanted)
    # a range that ends before them wants them too; no remote at all: every object is wanted
    assert _slice(4) in _labels(_split(blocks, {}, None, pull_selection(blocks="1-1"), unpushed_from=3).wanted)
    assert _split(blocks, manifests, new.hash(), state_only, unpushed_from=0).left_out == []
    # an older checkpoint an unpushed block added keeps its files
    newer = _manifest("000003.sst", "CURRENT")
    blocks = _chain([5, 5, 5], {1: old, 2: new, 3: newer})
    everything = {old.hash(): old, new.hash(): new, newer.hash(): newer}
    left = _labels(_split(blocks, everything, newer.hash(), DEFAULT, unpushed_from=2).left_out)
    assert left == {Multihash.of(b"000001.sst")}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"first_block": 5, "last_block": 3}, "end before they start"),
        ({"records": -4}, "records must be a whole number from 1"),
        ({"records": 0}, "records must be a whole number from 1"),
        ({"first_block": 1, "since": 10**18}, "one form, not blocks and since"),
        ({"since": 5, "records": 5}, "one form, not since and records"),
        ({"last_block": LONG_MAX + 1}, "last_block must be a whole number from 0"),
        ({"since": True}, "since must be a whole number"),
        ({"first_block": "3"}, "first_block must be a whole number"),
    ],
)
def test_a_malformed_slice_range_is_refused_wherever_it_comes_from(
    fields: dict[str, object], message: str, tmp_path: Path
) -> None:
    with pytest.raises(InvalidSelection, match=message):
        SliceRange(**fields)  # type: ignore[arg-type]
    # a record file holding one fails closed, with one line
    records = SelectionRecords(tmp_path)
    (tmp_path / "ds").write_text(f'{{"slices": [{msgspec.json.encode(fields).decode()}]}}')
    with pytest.raises(RepositoryError, match="not a selection record"):
        records.get("ds")


def test_a_malformed_selection_is_refused() -> None:
    with pytest.raises(InvalidSelection, match="'latest' or 'all'"):
        Selection(checkpoints="some")  # type: ignore[arg-type]
    with pytest.raises(InvalidSelection, match="tuple of SliceRange"):
        Selection(slices=[SliceRange(records=3)])  # type: ignore[arg-type]
    assert SliceRange() == SliceRange(first_block=None)  # both ends open: a valid range of every block


def test_since_before_1970_is_1970() -> None:
    assert pull_selection(since="1960-01-01") == Selection(slices=(SliceRange(since=0),))


def test_a_record_is_durable_before_set_returns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a drop deletes files once the narrower record is set: the record's data and its rename must be on
    # disk by then (a power cut must not keep the deletes and lose the record)
    synced: list[str] = []
    real = os.fsync

    def spy(descriptor: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{descriptor}"))
        real(descriptor)

    monkeypatch.setattr(os, "fsync", spy)
    records = SelectionRecords(tmp_path / "selection")
    records.set("ds", pull_selection(last=3))
    directory = str(tmp_path / "selection")
    assert len(synced) == 2 and synced[0].startswith(directory + "/.ds.") and synced[1] == directory
    assert records.get("ds") == pull_selection(last=3)


def test_the_sync_client_takes_the_same_drop_keywords_as_the_client() -> None:
    from smart_transfer.client import Client, SyncClient

    def keywords(method: object) -> dict[str, object]:
        parameters = inspect.signature(method).parameters.values()  # type: ignore[arg-type]
        return {p.name: p.default for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}

    assert keywords(SyncClient.drop) == keywords(Client.drop) and "last" in keywords(SyncClient.drop)
