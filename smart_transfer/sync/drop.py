"""What a drop of local object files may delete (``smart-transfer drop``, and a bounded ``pull --follow``
after each update): the objects of a chain that the narrower selection leaves out (the one rule,
``sync/selection.py``, which never leaves out the objects of blocks after the remote head the workspace
last synced: a later push needs them and the server may lack them). Pure: the workspace's I/O is
``client/flows/drop.py``'s."""

from __future__ import annotations

import msgspec
from msgspec import Struct

from smart_transfer.model import ObjectRef
from smart_transfer.model.selection import Selection
from smart_transfer.sync.selection import ChainView, split_objects


class DropSplit(Struct, frozen=True):
    """What a drop may delete (``going``), and what ``selection`` leaves out but stays because only this
    workspace has it (``kept_for_push``: objects of blocks after the remote head)."""

    going: list[ObjectRef]
    kept_for_push: list[ObjectRef]


def droppable(chain: ChainView, selection: Selection) -> DropSplit:
    """The objects of ``chain`` (a whole chain, from block 0) that ``selection`` leaves out: those the server
    holds go; those of blocks after the remote head (``chain.unpushed_from``) stay."""
    going = split_objects(chain, selection).left_out
    if chain.unpushed_from is None:
        return DropSplit(going, [])
    everything_pushed = split_objects(msgspec.structs.replace(chain, unpushed_from=None), selection).left_out
    leaving = {(ref.kind, ref.physical_hash) for ref in going}
    return DropSplit(going, [ref for ref in everything_pushed if (ref.kind, ref.physical_hash) not in leaving])
