"""Typed storage errors; callers never see boto3 or OS exceptions."""

from __future__ import annotations


class StorageError(Exception):
    """Base of every storage error."""


class ObjectNotFound(StorageError):
    """The key does not exist in the store."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"object not found: {key}")


class InvalidKey(StorageError):
    """A key that could escape the store's root or prefix, or is malformed."""


class StorageUnavailable(StorageError):
    """The store could not be reached or failed; the operation changed nothing it reports as done."""


class PresigningUnavailable(StorageError):
    """This store cannot hand out presigned URLs (e.g. a LocalStore with no public URL)."""


class PresignRefused(StorageError):
    """A presigned request that is expired, tampered with, or used with the wrong method or body."""

    def __init__(self, reason: str, status: int = 403) -> None:
        self.reason = reason
        self.status = status
        super().__init__(reason)


class NoSuchUpload(StorageError):
    """The multipart upload does not exist (never started, completed, or aborted)."""

    def __init__(self, key: str, upload_id: str) -> None:
        self.key = key
        self.upload_id = upload_id
        super().__init__(f"no multipart upload {upload_id} of {key}")


class MultipartRefused(StorageError):
    """The store refused to assemble a multipart upload: a part is missing, differs from the MD5 it
    was named with, or is smaller than the store allows."""
