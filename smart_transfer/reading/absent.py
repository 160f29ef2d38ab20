"""Which data slices of a workspace dataset are absent by choice: the chain references them, the selection
the workspace recorded (``repo/selection.py``) leaves them out (the one rule: ``sync/selection.py``'s
``split_objects``), and the workspace does not hold them. A read that asks for one either fetches it on
demand (a pull that widens the recorded selection, through the ``FetchAbsent`` the caller gives) or fails
with ``AbsentByChoice``: one line naming the blocks and offsets and the command that gets them. A slice
the selection wants and the workspace lacks is lost, never absent by choice (``dataset.py`` says how to
get it back); so is one ``verify`` moved to quarantine."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from smart_transfer.errors import LocalError
from smart_transfer.model import ChainTip, Multihash, ObjectKind
from smart_transfer.model.selection import Selection, SliceRange
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.reading.chain_view import chain_view
from smart_transfer.repo import Workspace
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.slices import SliceEntry
from smart_transfer.sync.selection import split_objects

#: What a read calls to fetch absent slices on demand: ``fetch(dataset name, selection)`` pulls the
#: dataset with its recorded selection widened by ``selection`` (``Client.fetch`` / ``SyncClient.fetch``).
FetchAbsent = Callable[[str, Selection], object]


@dataclass(frozen=True)
class AbsentRun:
    """Consecutive absent slices of a read (no present slice between them): their blocks and offsets."""

    first_block: int
    last_block: int
    first_offset: int
    last_offset: int

    def describe(self) -> str:
        if self.first_block == self.last_block:
            return f"block {self.first_block} (offsets {self.first_offset}-{self.last_offset})"
        return f"blocks {self.first_block}-{self.last_block} (offsets {self.first_offset}-{self.last_offset})"


class AbsentByChoice(LocalError):
    """A read asked for data slices this workspace left out by choice (a partial pull or a drop). ``runs``:
    the absent blocks and offsets; ``wanted``: the selection that fetches them (``Client.fetch(name,
    wanted)``, or ``fetch=`` on the read). A usage error (exit 2): the read asks for what the workspace
    chose not to hold; the message names the command that gets it."""

    def __init__(self, name: str, runs: Sequence[AbsentRun]) -> None:
        first, last = min(r.first_block for r in runs), max(r.last_block for r in runs)
        self.runs = tuple(runs)
        self.wanted = Selection(slices=(SliceRange(first_block=first, last_block=last),))
        described = ", ".join(run.describe() for run in runs)
        super().__init__(
            ErrorCode.INVALID_REQUEST,
            f"{name}: {described} absent by choice (a partial pull or a drop); read with --fetch (SDK: fetch=) "
            f"to get them, or `smart-transfer pull {name}` for every slice",
        )

    def __str__(self) -> str:
        return self.message


def slices_left_out(workspace: Workspace, dataset: DatasetRepository, tip: ChainTip) -> frozenset[Multihash]:
    """The data slices of the chain up to ``tip`` that the recorded selection leaves out (held or not)."""
    selection = workspace.selections.get(dataset.name)
    if selection.every_slice:
        return frozenset()
    # only data slices are asked about: no manifest is read, no checkpoint file is split
    split = split_objects(chain_view(workspace, dataset, tip, manifests={}), selection)
    return frozenset(ref.physical_hash for ref in split.left_out if ref.kind is ObjectKind.DATA)


def absent_runs(entries: Iterable[SliceEntry], absent: set[Multihash]) -> list[AbsentRun]:
    """The runs of ``entries`` (a read's slices, in chain order) whose slice is in ``absent``."""
    runs: list[AbsentRun] = []
    extending = False
    for entry in entries:
        if entry.data.physical_hash not in absent:
            extending = False
            continue
        if extending:
            last = runs[-1]
            runs[-1] = AbsentRun(last.first_block, entry.sequence_number, last.first_offset, entry.last_offset)
        else:
            runs.append(AbsentRun(entry.sequence_number, entry.sequence_number, entry.first_offset, entry.last_offset))
        extending = True
    return runs
