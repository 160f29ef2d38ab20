"""Object stores: one contract (ObjectStore), the embedded LocalStore and the S3Store."""

from smart_transfer.storage.base import ObjectInfo, ObjectStore, PendingUpload, PresignedRequest, UploadedPart
from smart_transfer.storage.errors import (
    InvalidKey,
    MultipartRefused,
    NoSuchUpload,
    ObjectNotFound,
    PresigningUnavailable,
    PresignRefused,
    StorageError,
    StorageUnavailable,
)

__all__ = [
    "InvalidKey",
    "MultipartRefused",
    "NoSuchUpload",
    "ObjectInfo",
    "ObjectNotFound",
    "ObjectStore",
    "PendingUpload",
    "PresignRefused",
    "PresignedRequest",
    "PresigningUnavailable",
    "StorageError",
    "StorageUnavailable",
    "UploadedPart",
]
