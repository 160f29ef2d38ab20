"""Object stores: one contract (ObjectStore), the embedded LocalStore and the S3Store."""

from smart_transfer.storage.base import ObjectInfo, ObjectStore, PresignedRequest
from smart_transfer.storage.errors import (
    InvalidKey,
    ObjectNotFound,
    PresigningUnavailable,
    PresignRefused,
    StorageError,
    StorageUnavailable,
)

__all__ = [
    "InvalidKey",
    "ObjectInfo",
    "ObjectNotFound",
    "ObjectStore",
    "PresignRefused",
    "PresignedRequest",
    "PresigningUnavailable",
    "StorageError",
    "StorageUnavailable",
]
