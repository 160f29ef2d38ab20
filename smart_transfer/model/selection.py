"""What a workspace chooses to hold of a dataset's objects: the metadata chain is always whole; which
checkpoint files it moves is the selection's. Pure data: the decision of which objects a selection wants
is ``sync/selection.py``'s, the workspace's record of it ``repo/selection.py``'s."""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

#: ``latest``: the files of the checkpoint a pull installs (a reader restores state from it); ``all``: the
#: files of every checkpoint of the chain.
CheckpointChoice = Literal["latest", "all"]


class Selection(Struct, frozen=True):
    """The objects a pull moves besides the metadata: every data slice, and the files of the latest
    checkpoint only (the default) or of every checkpoint (``checkpoints="all"``)."""

    checkpoints: CheckpointChoice = "latest"

    def narrower(self, other: Selection) -> Selection:
        """The selection both this one and ``other`` hold everything of: what a workspace may record
        while it moves from a chain chosen by one to a chain chosen by the other."""
        return self if self.checkpoints == "latest" else other


#: What a workspace with no record holds: everything (every pull moved every file before selections).
EVERYTHING = Selection(checkpoints="all")
