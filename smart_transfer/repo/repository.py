"""A repository: many datasets on one ObjectStore with one index. A Workspace is the local one."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Self, TypeVar

from smart_transfer.model import DatasetName, InvalidDatasetName
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.errors import WorkspaceNotFound
from smart_transfer.repo.index import RepositoryIndex
from smart_transfer.repo.layout import head_key
from smart_transfer.repo.lost import LostObjects
from smart_transfer.repo.remotes import Remotes
from smart_transfer.repo.selection import SelectionRecords
from smart_transfer.storage import ObjectStore
from smart_transfer.storage.local import INTERNAL_DIR, LocalStore

#: Where the CLI keeps its workspace unless ``--workspace`` or this variable says otherwise.
WORKSPACE_ENV = "SMART_TRANSFER_WORKSPACE"
DEFAULT_WORKSPACE = Path(".smart-transfer/workspace")
#: Head references a listing reads at once (``Repository.with_heads``).
HEAD_READS_PARALLEL = 16
T = TypeVar("T")
R = TypeVar("R")


def per_dataset(work: Callable[[T], R], names: Sequence[T]) -> list[R]:
    """``work`` of each of ``names``, in their order, HEAD_READS_PARALLEL at a time (a page of a listing:
    on S3 each reads at least a head, one round trip)."""
    if len(names) <= 1:
        return [work(name) for name in names]
    with ThreadPoolExecutor(max_workers=min(len(names), HEAD_READS_PARALLEL)) as pool:
        return list(pool.map(work, names))


class Repository:
    """Datasets on ``store``, indexed in a RocksDB directory at ``index_path``."""

    def __init__(self, store: ObjectStore, index_path: Path, *, read_only: bool = False) -> None:
        self.store = store
        self._index = RepositoryIndex(index_path, read_only=read_only)
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def dataset(self, name: str) -> DatasetRepository:
        """The dataset called ``name`` (validated; it need not exist yet)."""
        valid = DatasetName(name)
        with self._locks_guard:
            lock = self._locks.setdefault(valid, threading.Lock())
        return DatasetRepository(self.store, self._index, valid, lock)

    def dataset_names(self, after: str | None = None) -> Iterator[DatasetName]:
        """Names of the datasets that have a head, in the store's order (``candidate_names``)."""
        for name in self.candidate_names(after):
            if self.store.read_ref(head_key(name)) is not None:
                yield name

    def candidate_names(self, after: str | None = None) -> Iterator[DatasetName]:
        """The valid dataset names the store has a folder for, after ``after``, in the store's order of
        folders (``ObjectStore.list_children``: by ``name + "/"``), read lazily: S3 lists a page at a time
        from ``after``. A folder without a head is a first push under way (see ``with_heads``)."""
        for child in self.store.list_children("", after):
            try:
                yield DatasetName(child)
            except InvalidDatasetName:
                continue

    def with_heads(self, names: Sequence[DatasetName]) -> list[DatasetName]:
        """Those of ``names`` that have a head, in their order. One the index has synced had a head (no
        operation removes a head; a dataset deleted from the store by hand stays listed until a request
        touches it and the index forgets it); the others' refs are read, HEAD_READS_PARALLEL at a time
        (on S3 each is a round trip)."""
        unknown = [name for name in names if self._index.tip(name) is None]
        heads = dict(zip(unknown, per_dataset(lambda name: self.store.read_ref(head_key(name)), unknown), strict=True))
        return [name for name in names if name not in heads or heads[name] is not None]

    def check_index(self) -> None:
        """Raise RepositoryError unless the index can be written and read back (a readiness probe)."""
        self._index.check()

    def slice_stats(self, format_version: int, hashes: Sequence[str]) -> list[bytes | None]:
        """The statistics recorded for each slice by physical hash (None where none are): they are the
        content's, kept once for every dataset of the repository."""
        return self._index.slice_stats(format_version, hashes)

    def record_slice_stats(self, format_version: int, records: Iterable[tuple[str, bytes]]) -> None:
        """Record slice statistics by physical hash, in one atomic batch."""
        self._index.record_slice_stats(format_version, records)

    def close(self) -> None:
        """Close the index and the store."""
        self._index.close()
        self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: What a workspace directory holds: its store, its index and its datasets' remotes.
STORE_DIR, INDEX_DIR, REMOTES_DIR = "store", "index", "remotes"


class Workspace(Repository):
    """The client's local repository: a LocalStore plus index under one directory, and the remote
    each dataset syncs with by default.

    ``read_only``: open the index without its lock, so readers run while a pull or an ingest holds the
    workspace; they see the index as it was when opened, which only ever names committed chains."""

    def __init__(self, root: Path, *, read_only: bool = False) -> None:
        self.root = Path(root)
        #: The workspace's store, with the file-level operations a LocalStore offers.
        self.local_store = LocalStore(self.root / STORE_DIR)
        super().__init__(self.local_store, self.root / INDEX_DIR, read_only=read_only)
        self.remotes = Remotes(self.root / REMOTES_DIR)

    @classmethod
    def open_existing(cls, root: Path, *, read_only: bool = False) -> Workspace:
        """The workspace at ``root``; WorkspaceNotFound instead of creating one (read-only commands)."""
        if not (Path(root) / INDEX_DIR).is_dir():
            raise WorkspaceNotFound(f"no workspace at {root} (pull or add a dataset first, or give --workspace)")
        return cls(root, read_only=read_only)

    @property
    def quarantine(self) -> Path:
        """Where ``verify`` moves corrupt objects (named ``{hash}-{random}``)."""
        return self.local_store.root / INTERNAL_DIR / "quarantine"

    @property
    def lost(self) -> LostObjects:
        """The datasets known to have lost objects (the next pull checks and repairs them)."""
        return LostObjects(self.local_store.root / INTERNAL_DIR / "lost")

    @property
    def selections(self) -> SelectionRecords:
        """What the workspace chose to hold of each dataset (objects absent by choice are not lost)."""
        return SelectionRecords(self.local_store.root / INTERNAL_DIR / "selection")

    @staticmethod
    def default_root() -> Path:
        """``$SMART_TRANSFER_WORKSPACE`` or ``./.smart-transfer/workspace``."""
        return Path(os.environ.get(WORKSPACE_ENV) or DEFAULT_WORKSPACE)


class NewWorkspace:
    """A workspace about to be created (a pull from a URL into a directory that holds none), so that a
    failure can take back what it created: a refused or unreachable first pull changes nothing."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        #: The highest directory on the way to the root that does not exist yet (None: the root exists).
        self.first_missing: Path | None = None
        for path in (self.root, *self.root.parents):
            if os.path.lexists(path):
                break
            self.first_missing = path
        #: The parts that were there before: what the workspace did not create is never removed.
        self.existing = {part for part in (STORE_DIR, INDEX_DIR, REMOTES_DIR) if os.path.lexists(self.root / part)}

    @classmethod
    def at(cls, root: Path) -> NewWorkspace | None:
        """The workspace at ``root`` when it has no index yet; None when it has one."""
        return None if os.path.lexists(Path(root) / INDEX_DIR) else cls(root)

    def discard_unless_used(self) -> None:
        """Remove what was created, unless it holds what a re-run resumes from: a stored object, a
        remembered remote, or a download in progress (the store's staging files)."""
        store = self.root / STORE_DIR
        created = _names(self.root) - self.existing
        if _names(store) - {INTERNAL_DIR} or _names(store / INTERNAL_DIR / "tmp") or REMOTES_DIR in created:
            return
        if self.first_missing is not None:
            shutil.rmtree(self.first_missing, ignore_errors=True)
            return
        for part in created & {STORE_DIR, INDEX_DIR}:
            shutil.rmtree(self.root / part, ignore_errors=True)


def _names(directory: Path) -> set[str]:
    """The names in ``directory`` (none when it is not one, or cannot be read)."""
    try:
        return {entry.name for entry in directory.iterdir()} if directory.is_dir() else set()
    except OSError:
        return set()
