"""The latest checkpoint of a dataset in a workspace, as a RocksDB directory an engine can open:
``{workspace}/checkpoints/{dataset}/current`` is a symlink to ``cp-{manifest hash}``, switched
atomically (a new symlink renamed over the old one), so a crash leaves either checkpoint whole."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from smart_transfer.checkpoint.files import file_ref, linkable, restore
from smart_transfer.model import AddData, Multihash, NewBlock, ObjectKind, ObjectRef
from smart_transfer.model.manifest import CheckpointFile, CheckpointManifest
from smart_transfer.repo.dataset import DatasetRepository

CURRENT = "current"
#: Between a manifest hash and the suffix of a checkpoint installed again (``cp-{hash}~{token}``).
AGAIN = "~"


class CheckpointSlot:
    """Where one dataset's latest checkpoint lives in a workspace."""

    def __init__(self, workspace_root: Path, dataset: str) -> None:
        self.directory = Path(workspace_root) / "checkpoints" / dataset

    @property
    def current(self) -> Path:
        return self.directory / CURRENT

    def current_hash(self) -> Multihash | None:
        """The manifest hash of the installed checkpoint, or None."""
        try:
            target = os.readlink(self.current)
        except (FileNotFoundError, OSError):
            return None
        return Multihash.parse(target.removeprefix("cp-").split(AGAIN)[0])

    def path_for(self, manifest_hash: Multihash) -> Path:
        return self.directory / f"cp-{manifest_hash}"

    def switch_to(self, directory: Path) -> None:
        """Point ``current`` at an existing checkpoint directory of the slot, atomically; prune the others."""
        link = self.directory / f".link-{secrets.token_hex(6)}"
        os.symlink(directory.name, link)
        os.replace(link, self.current)
        for old in self.directory.glob("cp-*"):
            if old.name != directory.name:
                shutil.rmtree(old, ignore_errors=True)

    def install(self, dataset: DatasetRepository, manifest: CheckpointManifest, *, again: bool = False) -> Path:
        """Restore ``manifest`` from the workspace's objects (verified) and make it current; ``again``: even
        when it is current (its files were repaired: the installed ones may be links to the damaged ones)."""
        manifest_hash = manifest.hash()
        if self.current_hash() == manifest_hash and not again:
            return self.current
        self.directory.mkdir(parents=True, exist_ok=True)
        destination = self.path_for(manifest_hash)
        if again:
            destination = destination.with_name(f"{destination.name}{AGAIN}{secrets.token_hex(4)}")
        if not destination.exists():
            restore(dataset, manifest, destination)
        self.switch_to(destination)
        return self.current


def install_checked(workspace_root: Path, dataset: DatasetRepository) -> None:
    """After a pull repaired lost objects: install the current checkpoint again unless each of its linked
    files is still its object (a damaged object moved to quarantine is the installed file too)."""
    slot = CheckpointSlot(workspace_root, dataset.name)
    current = slot.current_hash()
    if current is None:
        return
    manifest = dataset.read_manifest(ObjectRef(ObjectKind.CHECKPOINT, current, 0))  # the key needs no size
    if not all(_still_linked(slot.current / item.name, dataset, item) for item in manifest.files if linkable(item)):
        slot.install(dataset, manifest, again=True)


def _still_linked(installed: Path, dataset: DatasetRepository, item: CheckpointFile) -> bool:
    source = dataset.store.local_path(dataset.object_key(file_ref(item)))
    try:
        return source is not None and os.path.samefile(installed, source)
    except OSError:
        return False


def latest_checkpoint(blocks: Sequence[NewBlock]) -> Multihash | None:
    """The manifest hash of the newest checkpoint among ``blocks``."""
    for item in reversed(blocks):
        event = item.block.event
        if isinstance(event, AddData) and event.new_checkpoint is not None:
            return event.new_checkpoint.physical_hash
    return None


def install_latest(
    workspace_root: Path,
    dataset: DatasetRepository,
    blocks: Sequence[NewBlock],
    manifests: Mapping[Multihash, CheckpointManifest],
) -> Path | None:
    """After a pull: make the newest checkpoint the new blocks carry the current one."""
    newest = latest_checkpoint(blocks)
    if newest is None:
        return None
    return CheckpointSlot(workspace_root, dataset.name).install(dataset, manifests[newest])
