"""Error codes carried by the ``Error`` message, and the exception that produces one."""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    """Every error a session can end with. The client maps them to exit codes."""

    BAD_MESSAGE = "BadMessage"  # not JSON, unknown type, wrong fields
    UNEXPECTED_MESSAGE = "UnexpectedMessage"  # valid message in the wrong phase
    MESSAGE_TOO_LARGE = "MessageTooLarge"
    UNSUPPORTED_PROTOCOL = "UnsupportedProtocol"
    INVALID_DATASET_NAME = "InvalidDatasetName"
    DATASET_NOT_FOUND = "DatasetNotFound"
    INVALID_INTERVAL = "InvalidInterval"  # pull: stop_at/begin_after not on the chain, or reversed
    DIVERGED = "Diverged"  # pull: histories differ and force was not given
    INVALID_HEAD = "InvalidHead"  # push: remote head is not what the client expected
    INVALID_BLOCKS = "InvalidBlocks"  # push: tarball or chain rules broken
    SEED_MISMATCH = "SeedMismatch"  # force never replaces a dataset with a different Seed
    OBJECT_NOT_ALLOWED = "ObjectNotAllowed"  # object not referenced by the blocks of this session
    TOO_MANY_OBJECTS = "TooManyObjects"  # a page larger than the server allows
    UPLOAD_INVALID = "UploadInvalid"  # push complete: an object missing or of the wrong size/MD5
    STORAGE_UNAVAILABLE = "StorageUnavailable"
    UNAUTHORIZED = "Unauthorized"
    FORBIDDEN = "Forbidden"
    BUSY = "Busy"
    TIMEOUT = "Timeout"
    UNREACHABLE = "Unreachable"  # client side: the server could not be reached
    INTERNAL = "Internal"


#: Errors after which retrying the same operation later may succeed.
RETRYABLE = frozenset(
    {ErrorCode.UNREACHABLE, ErrorCode.STORAGE_UNAVAILABLE, ErrorCode.BUSY, ErrorCode.TIMEOUT, ErrorCode.INTERNAL}
)
#: Errors meaning the histories disagree: the CLI exits 3 for these.
REJECTIONS = frozenset({ErrorCode.DIVERGED, ErrorCode.INVALID_HEAD, ErrorCode.SEED_MISMATCH})


class ProtocolError(Exception):
    """A failure to report to the peer as an ``Error`` message before closing."""

    def __init__(self, code: ErrorCode, message: str, details: dict[str, Any] | None = None) -> None:
        self.code = code
        self.message = message
        self.details = details or {}
        super().__init__(f"{code.value}: {message}")
