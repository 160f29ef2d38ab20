"""A repository: many datasets on one ObjectStore with one index. A Workspace is the local one."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
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
        self.index = RepositoryIndex(index_path, read_only=read_only)
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def dataset(self, name: str) -> DatasetRepository:
        """The dataset called ``name`` (validated; it need not exist yet)."""
        valid = DatasetName(name)
        with self._locks_guard:
            lock = self._locks.setdefault(valid, threading.Lock())
        return DatasetRepository(self.store, self.index, valid, lock)

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
        unknown = [name for name in names if self.index.tip(name) is None]
        heads = dict(zip(unknown, per_dataset(lambda name: self.store.read_ref(head_key(name)), unknown), strict=True))
        return [name for name in names if name not in heads or heads[name] is not None]

    def close(self) -> None:
        self.index.close()
        self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Workspace(Repository):
    """The client's local repository: a LocalStore plus index under one directory, and the remote
    each dataset syncs with by default.

    ``read_only``: open the index without its lock, so readers run while a pull or an ingest holds the
    workspace; they see the index as it was when opened, which only ever names committed chains."""

    def __init__(self, root: Path, *, read_only: bool = False) -> None:
        self.root = Path(root)
        #: The workspace's store, with the file-level operations a LocalStore offers.
        self.local_store = LocalStore(self.root / "store")
        super().__init__(self.local_store, self.root / "index", read_only=read_only)
        self.remotes = Remotes(self.root / "remotes")

    @classmethod
    def open_existing(cls, root: Path, *, read_only: bool = False) -> Workspace:
        """The workspace at ``root``; WorkspaceNotFound instead of creating one (read-only commands)."""
        if not (Path(root) / "index").is_dir():
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

    @staticmethod
    def default_root() -> Path:
        """``$SMART_TRANSFER_WORKSPACE`` or ``./.smart-transfer/workspace``."""
        return Path(os.environ.get(WORKSPACE_ENV) or DEFAULT_WORKSPACE)
