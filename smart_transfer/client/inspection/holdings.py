"""What a workspace holds of a dataset's objects under the selection it recorded (``repo/selection.py``):
the objects present, and those absent by choice (files of older checkpoints, data slices outside the
range a pull chose), never
confused with lost ones (an object the selection wants and the workspace lacks). ``status`` reports it;
``verify`` skips what is absent by choice and checks the rest."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from smart_transfer.model import ChainTip, Multihash, NewBlock, ObjectKind, ObjectRef
from smart_transfer.model.manifest import CheckpointManifest
from smart_transfer.model.selection import EVERYTHING
from smart_transfer.reading.chain_view import chain_view, files_absent
from smart_transfer.repo import Workspace
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.sync.selection import split_objects


@dataclass
class Holdings:
    """A partial dataset's objects, in objects and bytes: present, and absent by choice (of which data
    slices; the rest are checkpoints' files)."""

    checkpoints: str
    present_objects: int = 0
    present_bytes: int = 0
    absent_objects: int = 0
    absent_bytes: int = 0
    absent_slices: int = 0
    absent_slice_bytes: int = 0

    def describe(self, name: str = "DATASET") -> str:
        """The holdings in words (one line): what is absent and the pull of dataset ``name`` that gets it."""
        return f"partial: {self.present_objects} object(s), {self.present_bytes} bytes present; " + absent_words(
            name, self.absent_objects, self.absent_bytes, self.absent_slices
        )


def absent_words(name: str, objects: int, size: int, slices: int) -> str:
    """``objects`` absent by choice (``size`` bytes, ``slices`` of them data slices) in words: what they
    are and the pull of dataset ``name`` that fetches them (``status`` and ``verify`` say it alike)."""
    parts = []
    if slices:
        parts.append(f"{slices} data slice(s) outside the chosen range")
    if objects > slices:
        parts.append(f"{objects - slices} file(s) of older checkpoints")
    command = f"smart-transfer pull {name}" + (" --all-checkpoints" if objects > slices else "")
    return f"{objects} object(s), {size} bytes absent by choice ({' and '.join(parts)}; `{command}` fetches them)"


def absent_by_choice(
    workspace: Workspace,
    dataset: DatasetRepository,
    tip: ChainTip,
    blocks: Sequence[NewBlock],
    manifests: Mapping[Multihash, CheckpointManifest],
) -> set[tuple[ObjectKind, Multihash]]:
    """The objects of the chain ``blocks`` (up to ``tip``) that the recorded selection leaves out and the
    workspace has no file of (``manifests``: those of its checkpoints that could be read)."""
    selection = workspace.selections.get(dataset.name)
    if selection == EVERYTHING:
        return set()
    chain = chain_view(workspace, dataset, tip, blocks=blocks, manifests=manifests)
    return {(ref.kind, ref.physical_hash) for ref in files_absent(dataset, split_objects(chain, selection).left_out)}


def holdings(workspace: Workspace, name: str) -> Holdings | None:
    """What workspace dataset ``name`` holds, when it is partial (something is absent by choice); None when
    the workspace holds everything it references (no walk of the chain when it never chose less)."""
    selection = workspace.selections.get(name)
    dataset = workspace.dataset(name)
    tip = dataset.tip()
    if selection == EVERYTHING or tip is None:
        return None
    split = split_objects(chain_view(workspace, dataset, tip), selection)
    absent = files_absent(dataset, split.left_out)
    if not absent:
        return None
    every = [*split.wanted, *split.left_out]
    missing = {(ref.kind, ref.physical_hash) for ref in dataset.objects_missing(every)}
    present = [ref for ref in every if (ref.kind, ref.physical_hash) not in missing]
    return _tally(selection.checkpoints, present, absent)


def _tally(checkpoints: str, present: Sequence[ObjectRef], absent: Sequence[ObjectRef]) -> Holdings:
    slices = [ref for ref in absent if ref.kind is ObjectKind.DATA]
    return Holdings(
        checkpoints,
        len(present),
        sum(ref.size for ref in present),
        len(absent),
        sum(ref.size for ref in absent),
        len(slices),
        sum(ref.size for ref in slices),
    )
