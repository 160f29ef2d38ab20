"""What a workspace chose to hold of each dataset (``model/selection.py``), recorded so that every reader
tells an object absent by choice from a lost one: an object the chain references that the recorded
selection does not want and the workspace does not hold is absent by choice; one it wants and lacks is
lost (``repo/lost.py``). A file per dataset (``{dataset}``), replaced atomically, beside the lost marks
and not in the index: the index is a cache rebuilt from the store, and a record rebuilt as "everything"
would call every absent file lost. No record: the workspace holds everything (pulls before selections)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from smart_transfer.model.selection import EVERYTHING, Selection
from smart_transfer.repo.errors import RepositoryError
from smart_transfer.storage.durable import replace_durably


class SelectionRecords:
    """The recorded selection of each dataset of a workspace, under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def get(self, name: str) -> Selection:
        """The selection recorded for dataset ``name`` (EVERYTHING when none is). A record that cannot be
        read refuses (fail closed): guessing would call absent objects lost or lost ones absent."""
        path = self.directory / name
        try:
            data = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return EVERYTHING
        try:
            return msgspec.json.decode(data, type=Selection)
        except msgspec.DecodeError as exc:
            raise RepositoryError(f"{path}: not a selection record ({exc}); remove it and pull again") from None

    def set(self, name: str, selection: Selection) -> None:
        """Record ``selection`` for ``name`` (a new file, synced, renamed over the old, the directory synced:
        a crash or a power cut leaves one whole)."""
        if self.get(name) == selection:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        # durable before it returns: a drop deletes files once the narrower record is, and a power cut
        # must not keep the deletes and lose the record (the files would be called lost)
        replace_durably(self.directory / name, msgspec.json.encode(selection))
