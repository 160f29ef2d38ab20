"""A workspace dataset's chain as the one selection rule sees it (``sync/selection.py``: ``ChainView``),
built in one place for every classifier of local objects: ``status`` and ``verify`` (absent by choice or
lost), the reads (absent by choice: fetch or say how) and a drop (what may go). Here, below the client,
because the reads need it too; it only reads the workspace."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from smart_transfer.checkpoint.slot import latest_checkpoint
from smart_transfer.model import ChainTip, Multihash, NewBlock, ObjectRef, checkpoint_refs
from smart_transfer.model.manifest import CheckpointManifest
from smart_transfer.repo import RepositoryError, Workspace
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.sync.selection import ChainView


def chain_view(
    workspace: Workspace,
    dataset: DatasetRepository,
    tip: ChainTip,
    *,
    blocks: Sequence[NewBlock] | None = None,
    manifests: Mapping[Multihash, CheckpointManifest] | None = None,
    remote: str | None = None,
) -> ChainView:
    """The chain of ``dataset`` from block 0 up to ``tip`` for the rule: ``blocks`` (default: decoded from
    the index), ``manifests`` (default: those the workspace can read; ``{}`` when only data slices are
    asked about), the latest checkpoint, the head's next offset, and where the blocks no remote holds
    begin (``unpushed_from``: after the head that ``remote``, default the dataset's remote, had when the
    workspace last synced with it)."""
    if blocks is None:
        blocks = [
            NewBlock.decode(data, block_hash) for block_hash, data in dataset.chain_blocks(0, tip.sequence_number)
        ]
    if manifests is None:
        manifests = readable_manifests(dataset, blocks)
    return ChainView(
        list(blocks), manifests, latest_checkpoint(blocks), tip.next_offset, unpushed_from(workspace, dataset, remote)
    )


def synced_through(workspace: Workspace, dataset: DatasetRepository, remote: str | None = None) -> int | None:
    """The sequence number of the remote head as the workspace last synced it with ``remote`` (default:
    the dataset's remote): what the server holds. None: no remote, never synced, or a head that is not on
    the local chain (the histories diverged)."""
    url = remote or workspace.remotes.get(dataset.name)
    head = dataset.remote_head(url) if url is not None else None
    return dataset.sequence_of(head) if head is not None else None


def unpushed_from(workspace: Workspace, dataset: DatasetRepository, remote: str | None = None) -> int:
    """The sequence number of the first block of the local chain no remote is known to hold (0: none is)."""
    synced = synced_through(workspace, dataset, remote)
    return 0 if synced is None else synced + 1


def readable_manifests(dataset: DatasetRepository, blocks: Sequence[NewBlock]) -> dict[Multihash, CheckpointManifest]:
    """The manifests of the checkpoints ``blocks`` reference that the workspace can read."""
    manifests = {}
    for ref in checkpoint_refs(blocks):
        try:
            manifests[ref.physical_hash] = dataset.read_manifest(ref)
        except RepositoryError:
            continue  # a lost manifest: its files are lost, not absent by choice (verify says so)
    return manifests


def files_absent(dataset: DatasetRepository, refs: Iterable[ObjectRef]) -> list[ObjectRef]:
    """Of ``refs``, those the workspace has no file of: the one test of "absent" for every classifier (a
    file that is there but short or long is damage, not a choice: ``verify`` checks it, a read names it)."""
    return [ref for ref in dataset.objects_missing(refs) if not _exists(dataset, ref)]


def _exists(dataset: DatasetRepository, ref: ObjectRef) -> bool:
    path = dataset.store.local_path(dataset.object_key(ref))
    return path is not None and path.exists()
