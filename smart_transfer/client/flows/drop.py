"""Dropping local object files a workspace no longer wants (``smart-transfer drop``, ``Client.drop``, and
a bounded ``pull --follow`` after each update): the files outside a narrower selection (a range of data
slices, state only, or older checkpoints' files), never the server's, never what a later push needs
unless the server holds it (``sync/drop.py`` decides). The workspace must be open for writing (its index's
lock keeps a pull, an ingest or another drop out meanwhile; readers go on and see the choice).

Crash-safe order: the narrower selection is recorded first, then the files are deleted, so a crash
between leaves files the record does not want (harmless: present) and never a missing file the record
wants (which ``verify`` would call lost)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from functools import partial

import msgspec
from msgspec import Struct

from smart_transfer.config.values import BadValue
from smart_transfer.errors import LocalError, sdk_errors
from smart_transfer.model import DatasetName, ObjectKind, ObjectRef
from smart_transfer.model.selection import EVERYTHING, CheckpointChoice, Selection
from smart_transfer.model.versions import Range, pull_selection
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.reading.chain_view import chain_view, files_absent, synced_through
from smart_transfer.repo import Workspace
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.sync.drop import droppable
from smart_transfer.sync.selection import ChainView, range_past_head, split_objects


class DropReport(Struct):
    """What a drop deleted (or, with ``dry_run``, would delete) and the selection it recorded."""

    dataset: str
    selection: Selection
    dry_run: bool
    objects: int = 0
    bytes: int = 0
    #: Objects outside the selection kept because a later push needs them (blocks after the remote head).
    kept_for_push: int = 0

    def to_dict(self) -> dict[str, object]:
        """The report as ``drop --json`` prints it."""
        return {
            "dataset": self.dataset,
            "selection": msgspec.to_builtins(self.selection),
            "dry_run": self.dry_run,
            "objects": self.objects,
            "bytes": self.bytes,
            "kept_for_push": self.kept_for_push,
        }

    def describe(self) -> str:
        """The report in words (one line)."""
        verb = "would drop" if self.dry_run else "dropped"
        kept = f"; kept {self.kept_for_push} object(s) a push still needs" if self.kept_for_push else ""
        return f"{self.dataset}: {verb} {self.objects} object(s), {self.bytes} bytes{kept}"


def drop(
    workspace: Workspace, name: str, selection: Selection, *, dry_run: bool = False, remote: str | None = None
) -> DropReport:
    """Delete the local object files of dataset ``name`` that ``selection`` leaves out and the server holds,
    recording ``selection`` first (see the module docstring). ``dry_run``: only say what would go; ``remote``:
    the URL whose last synced head the server holds (default: the dataset's remote). Raises
    LocalError (a usage error, nothing changed) for an unknown dataset, one with no remote or whose remote
    head is not on the local chain, a workspace open read-only, blocks past the head, or a selection that
    wants what the workspace left out by choice (a drop only narrows: pull first)."""
    with sdk_errors():
        dataset = workspace.dataset(str(DatasetName(name)))
        tip = dataset.require_tip()
        if not dataset.writable:
            raise LocalError(ErrorCode.INVALID_REQUEST, f"{name}: a drop needs the workspace open for writing")
        url = remote or workspace.remotes.get(dataset.name)
        _require_synced(workspace, dataset, url)
        reason = range_past_head(selection, tip.sequence_number, "drop")
        if reason is not None:
            raise LocalError(ErrorCode.INVALID_REQUEST, f"{dataset.name}: {reason}")
        chain = chain_view(workspace, dataset, tip, remote=url)
        _refuse_widening(dataset, chain, workspace.selections.get(dataset.name), selection)
        split = droppable(chain, selection)
        present = _present(dataset, split.going)
        report = DropReport(dataset.name, selection, dry_run, len(present), sum(ref.size for ref in present))
        report.kept_for_push = len(_present(dataset, split.kept_for_push))
        if dry_run:
            return report
        workspace.selections.set(dataset.name, selection)  # first: a crash never leaves a wanted file missing
        for ref in present:
            dataset.store.delete(dataset.object_key(ref))
    return report


def _present(dataset: DatasetRepository, refs: list[ObjectRef]) -> list[ObjectRef]:
    missing = {(ref.kind, ref.physical_hash) for ref in dataset.objects_missing(refs)}
    return [ref for ref in refs if (ref.kind, ref.physical_hash) not in missing]


def _require_synced(workspace: Workspace, dataset: DatasetRepository, url: str | None) -> None:
    """Refuse a drop that cannot know what the server holds: no remote, or a remote head (as last synced)
    that is not on the local chain."""
    if url is None:
        raise LocalError(
            ErrorCode.INVALID_REQUEST,
            f"{dataset.name} has no remote: this workspace's copy is the only one, so nothing of it is dropped",
        )
    if synced_through(workspace, dataset, url) is None:
        raise LocalError(
            ErrorCode.INVALID_REQUEST,
            f"{dataset.name}: the head of its remote {url} is not on the local chain (never synced, or the histories "
            "diverged); pull or push first, so a drop knows what the server holds",
        )


def _refuse_widening(dataset: DatasetRepository, chain: ChainView, recorded: Selection, selection: Selection) -> None:
    """Refuse a selection that wants objects the workspace lacks by choice: recording it would call them lost."""
    wanted = {(ref.kind, ref.physical_hash) for ref in split_objects(chain, selection).wanted}
    absent = files_absent(
        dataset, (ref for ref in split_objects(chain, recorded).left_out if (ref.kind, ref.physical_hash) in wanted)
    )
    if absent:
        slices = sum(1 for ref in absent if ref.kind is ObjectKind.DATA)
        raise LocalError(
            ErrorCode.INVALID_REQUEST,
            f"{dataset.name}: that range wants {len(absent)} object(s) ({slices} data slice(s)) the workspace left out "
            f"by choice; a drop only narrows what it holds: pull them first (`smart-transfer pull {dataset.name}` "
            "with that range)",
        )


def drop_selection(
    recorded: Selection,
    *,
    older_checkpoints: bool = False,
    state_only: bool = False,
    blocks: str | Range | None = None,
    since: str | datetime | None = None,
    last: str | int | None = None,
) -> Selection:
    """The selection a drop records, from what it is asked to keep (the same words as ``pull``'s, read by
    the one parser ``pull_selection``) on top of the ``recorded`` one: a range of slices replaces the
    recorded range, ``older_checkpoints`` keeps only the latest checkpoint's files; what is not named
    stays as recorded. LocalError (a usage error) when nothing or two ranges are named."""
    try:
        asked = pull_selection(state_only=state_only, blocks=blocks, since=since, last=last, command="drop")
    except BadValue as exc:
        raise LocalError(ErrorCode.INVALID_REQUEST, str(exc)) from None
    ranged = state_only or (blocks, since, last) != (None, None, None)
    if not ranged and not older_checkpoints:
        raise LocalError(
            ErrorCode.INVALID_REQUEST,
            "say what to keep: --state-only, --blocks, --since or --last (data slices), or --older-checkpoints "
            "(SDK: state_only=, blocks=, since=, last=, older_checkpoints=)",
        )
    checkpoints: CheckpointChoice = "latest" if older_checkpoints else recorded.checkpoints
    return Selection(checkpoints, asked.slices if ranged else recorded.slices)


async def keep_bounded(workspace: Workspace, name: str, selection: Selection, remote: str) -> DropReport | None:
    """After an update of a follower: drop the files that fell out of what it follows (a range of slices:
    ``pull --follow --last N``, ``--state-only``...; and the previous latest checkpoint's files, unless it
    follows with ``--all-checkpoints``), so its disk stays bounded (None: a follower of everything keeps
    what it pulls). Only what the server holds goes (``drop``). ``remote``: the URL it follows."""
    if selection == EVERYTHING:
        return None
    return await asyncio.to_thread(partial(drop, remote=remote), workspace, name, selection)
