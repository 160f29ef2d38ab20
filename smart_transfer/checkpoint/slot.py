"""The latest checkpoint of a dataset in a workspace, as a RocksDB directory an engine can open:
``{workspace}/checkpoints/{dataset}/current`` is a symlink to ``cp-{manifest hash}``, switched
atomically (a new symlink renamed over the old one), so a crash leaves either checkpoint whole."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from smart_transfer.checkpoint.files import restore
from smart_transfer.model import AddData, Multihash, NewBlock
from smart_transfer.model.manifest import CheckpointManifest
from smart_transfer.repo.dataset import DatasetRepository

CURRENT = "current"


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
        return Multihash.parse(target.removeprefix("cp-"))

    def path_for(self, manifest_hash: Multihash) -> Path:
        return self.directory / f"cp-{manifest_hash}"

    def switch_to(self, manifest_hash: Multihash) -> None:
        """Point ``current`` at an existing ``cp-{hash}`` directory, atomically; prune the others."""
        link = self.directory / f".link-{secrets.token_hex(6)}"
        os.symlink(f"cp-{manifest_hash}", link)
        os.replace(link, self.current)
        for old in self.directory.glob("cp-*"):
            if old.name != f"cp-{manifest_hash}":
                shutil.rmtree(old, ignore_errors=True)

    def install(self, dataset: DatasetRepository, manifest: CheckpointManifest) -> Path:
        """Restore ``manifest`` from the workspace's objects (verified) and make it current."""
        manifest_hash = manifest.hash()
        if self.current_hash() == manifest_hash:
            return self.current
        self.directory.mkdir(parents=True, exist_ok=True)
        destination = self.path_for(manifest_hash)
        if not destination.exists():
            restore(dataset, manifest, destination)
        self.switch_to(manifest_hash)
        return self.current


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
