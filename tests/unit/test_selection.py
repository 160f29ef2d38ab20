"""Which objects a selection wants (sync/selection.py), the record of it (repo/selection.py): the latest
checkpoint's files, or every checkpoint's; manifests and their pages always; a file a wanted checkpoint
shares is never left out; a record that cannot be read refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from smart_transfer.model import Multihash, ObjectKind, ObjectRef
from smart_transfer.model.manifest import CheckpointFile, CheckpointManifest, build_manifest
from smart_transfer.model.selection import EVERYTHING, Selection
from smart_transfer.repo import RepositoryError
from smart_transfer.repo.selection import SelectionRecords
from smart_transfer.sync.selection import split_objects


def _file(name: str) -> CheckpointFile:
    data = name.encode()
    return CheckpointFile(name, Multihash.of(data), len(data), name.endswith(".sst"))


def _checkpoint(*names: str) -> tuple[ObjectRef, CheckpointManifest]:
    manifest = build_manifest([_file(n) for n in names])
    return ObjectRef(ObjectKind.CHECKPOINT, manifest.hash(), len(manifest.encode())), manifest


def _labels(refs: list[ObjectRef]) -> set[Multihash]:
    return {ref.physical_hash for ref in refs}


def test_only_the_latest_checkpoints_files_are_wanted_and_shared_files_never_left_out() -> None:
    old_ref, old = _checkpoint("000001.sst", "000002.sst", "CURRENT")
    new_ref, new = _checkpoint("000002.sst", "000003.sst", "CURRENT")
    data = ObjectRef(ObjectKind.DATA, Multihash.of(b"slice"), 5)
    manifests = {old_ref.physical_hash: old, new_ref.physical_hash: new}
    split = split_objects([data, old_ref, new_ref], manifests, new_ref.physical_hash, Selection())
    shared = {Multihash.of(b"000002.sst"), Multihash.of(b"CURRENT")}
    assert _labels(split.left_out) == {Multihash.of(b"000001.sst")}
    assert {data.physical_hash, old_ref.physical_hash, new_ref.physical_hash} | shared <= _labels(split.wanted)
    assert Multihash.of(b"000003.sst") in _labels(split.wanted)
    everything = split_objects([data, old_ref, new_ref], manifests, new_ref.physical_hash, EVERYTHING)
    assert everything.left_out == [] and _labels(everything.wanted) == _labels(split.wanted) | _labels(split.left_out)


def test_without_a_checkpoint_nothing_is_left_out() -> None:
    data = ObjectRef(ObjectKind.DATA, Multihash.of(b"slice"), 5)
    assert split_objects([data], {}, None, Selection()).left_out == []


def test_the_narrower_selection_is_the_one_both_hold_everything_of() -> None:
    latest = Selection()
    assert latest.narrower(EVERYTHING) == latest and EVERYTHING.narrower(latest) == latest
    assert EVERYTHING.narrower(EVERYTHING) == EVERYTHING


def test_a_record_is_kept_replaced_and_refused_when_unreadable(tmp_path: Path) -> None:
    records = SelectionRecords(tmp_path / "selection")
    assert records.get("ds") == EVERYTHING  # no record: a workspace from before selections holds everything
    records.set("ds", Selection())
    assert records.get("ds") == Selection() and records.get("other") == EVERYTHING
    records.set("ds", EVERYTHING)
    assert records.get("ds") == EVERYTHING
    assert sorted(p.name for p in (tmp_path / "selection").iterdir()) == ["ds"]  # no staged file left
    (tmp_path / "selection" / "ds").write_bytes(b'{"checkpoints": "some"}')
    with pytest.raises(RepositoryError, match="not a selection record"):
        records.get("ds")
