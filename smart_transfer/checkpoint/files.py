"""Checkpoint directories <-> content-addressed objects in a repository's store."""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

from msgspec import Struct
from rocksdict import AccessType, Checkpoint, Options, Rdict

from smart_transfer.model import ObjectRef
from smart_transfer.model.manifest import CheckpointFile, CheckpointManifest, build_manifest, is_immutable
from smart_transfer.model.manifest_file import MIRROR_PREFIX, MIRROR_SUFFIX
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.layout import ObjectKind
from smart_transfer.storage.digest import digest_file


class CheckpointError(Exception):
    """A checkpoint that cannot be made, stored or restored."""


def snapshot(db: Rdict, destination: Path) -> None:
    """A consistent RocksDB checkpoint of ``db`` at ``destination`` (SST files hard-linked)."""
    Checkpoint(db).create_checkpoint(str(destination))


def describe(directory: Path) -> CheckpointManifest:
    """Hash every file of a checkpoint directory."""
    files = []
    for path in sorted(directory.iterdir()):
        if not path.is_file():
            raise CheckpointError(f"unexpected entry in checkpoint: {path.name}")
        digest = digest_file(path)
        files.append(CheckpointFile(path.name, digest.multihash, digest.size, is_immutable(path.name)))
    return build_manifest(files)


def file_ref(item: CheckpointFile) -> ObjectRef:
    return ObjectRef(ObjectKind.CHECKPOINT, item.physical_hash, item.size)


class StoredCheckpoint(Struct, frozen=True):
    """What storing a checkpoint wrote: its manifest, and the files, bytes and manifest objects (the
    root and the pages it does not share with earlier checkpoints) that were new."""

    manifest: CheckpointManifest
    files: int
    bytes: int
    pages: int


def store_checkpoint(dataset: DatasetRepository, directory: Path) -> StoredCheckpoint:
    """Store every file not already stored, then the manifest's pages not already stored (files and
    pages shared with earlier checkpoints are stored once)."""
    manifest = describe(directory)
    new_files = new_bytes = 0
    for item in manifest.files:
        ref = file_ref(item)
        if dataset.objects_missing([ref]):
            dataset.store.put_file(dataset.object_key(ref), directory / item.name)
            new_files += 1
            new_bytes += item.size
    return StoredCheckpoint(manifest, new_files, new_bytes, store_manifest(dataset, manifest))


def store_manifest(dataset: DatasetRepository, manifest: CheckpointManifest) -> int:
    """Write the pages of ``manifest`` the store lacks, leaves first and the root last (a reader that
    finds the root finds every page under it); returns how many were written."""
    written = 0
    for page_hash, data in reversed(manifest.all_pages()):
        ref = ObjectRef(ObjectKind.CHECKPOINT, page_hash, len(data))
        if dataset.objects_missing([ref]):
            dataset.store.put(dataset.object_key(ref), data)
            written += 1
    return written


def link_or_copy(source: Path, destination: Path) -> bool:
    """A hard link of ``source`` at ``destination``, or a copy where links cannot be made (another
    filesystem, a filesystem without them). Returns whether it linked."""
    try:
        os.link(source, destination)
        return True
    except OSError:
        shutil.copyfile(source, destination)
        return False


def linkable(item: CheckpointFile) -> bool:
    """Whether nothing rewrites the file in place: RocksDB's SST and blob files, ingest's key mirrors."""
    return item.immutable or (item.name.startswith(MIRROR_PREFIX) and item.name.endswith(MIRROR_SUFFIX))


def _restore_file(source: Path, item: CheckpointFile, destination: Path) -> None:
    """One file of a restore. A ``linkable`` one is hard-linked to its object, as RocksDB's own
    checkpoints link SST files: a pull of a 10-row change to a state of hundreds of GiB would otherwise
    copy all of it. Its object was verified when it was put into place, so its size is checked; a copy
    (a file RocksDB changes, or where links cannot be made) is hashed."""
    try:
        size = source.stat().st_size
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint file {item.name} ({item.physical_hash}) is missing") from None
    if size != item.size:
        raise CheckpointError(f"checkpoint file {item.name} does not match its hash ({size} bytes, not {item.size})")
    if not linkable(item):
        shutil.copyfile(source, destination)
    elif link_or_copy(source, destination):
        return
    digest = digest_file(destination, item.physical_hash.code)
    if digest.mismatch(item.physical_hash, item.size) is not None:
        raise CheckpointError(f"checkpoint file {item.name} does not match its hash")


def restore(dataset: DatasetRepository, manifest: CheckpointManifest, destination: Path) -> None:
    """Rebuild the checkpoint at ``destination``: files into a temporary directory (see ``_restore_file``),
    then one atomic rename. ``destination`` must not exist yet."""
    store = dataset.store
    temp = destination.parent / f".restore-{secrets.token_hex(6)}"
    temp.mkdir(parents=True)
    try:
        for item in manifest.files:
            source = store.local_path(dataset.object_key(file_ref(item)))
            if source is None:
                raise CheckpointError("checkpoints are restored from a workspace (a store on local disk)")
            _restore_file(source, item, temp / item.name)
        os.rename(temp, destination)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise


def open_checkpoint(directory: Path, *, read_only: bool = False) -> Rdict:
    """Open a checkpoint directory as a database (raw bytes keys and values)."""
    options = Options(raw_mode=True)
    access = AccessType.read_only() if read_only else AccessType.read_write()
    return Rdict(str(directory), options, access_type=access)
