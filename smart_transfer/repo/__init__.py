"""Dataset repositories: refs + blocks + objects laid out on an ObjectStore, indexed in RocksDB."""

from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.errors import DatasetNotFound, HeadMoved, RepositoryError
from smart_transfer.repo.layout import ObjectKind
from smart_transfer.repo.repository import Repository, Workspace

__all__ = [
    "DatasetNotFound",
    "DatasetRepository",
    "HeadMoved",
    "ObjectKind",
    "Repository",
    "RepositoryError",
    "Workspace",
]
