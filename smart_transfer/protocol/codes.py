"""The error codes, apart from their typed details: each code's HTTP status, which codes a retry may
cure, which are rejections and which are the server's fault. Kept free of pydantic so that a CLI command
that never talks to a server starts without loading it; :mod:`smart_transfer.protocol.errors` adds the
details models and ``ProtocolError``.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """Every error code. The client's exit codes and retry decisions are made from these."""

    BAD_MESSAGE = "BadMessage"  # not JSON, unknown type, wrong fields
    UNEXPECTED_MESSAGE = "UnexpectedMessage"  # a valid message in the wrong phase
    MESSAGE_TOO_LARGE = "MessageTooLarge"  # a frame or request body over the limit
    UNSUPPORTED_PROTOCOL = "UnsupportedProtocol"  # the WebSocket subprotocol was not offered
    INVALID_REQUEST = "InvalidRequest"  # REST: a malformed header, query or body
    INVALID_DATASET_NAME = "InvalidDatasetName"
    INVALID_HASH = "InvalidHash"
    NO_SUCH_ROUTE = "NoSuchRoute"  # no endpoint at this path
    METHOD_NOT_ALLOWED = "MethodNotAllowed"
    DATASET_NOT_FOUND = "DatasetNotFound"
    BLOCK_NOT_FOUND = "BlockNotFound"
    OBJECT_NOT_FOUND = "ObjectNotFound"
    INVALID_INTERVAL = "InvalidInterval"  # pull: stop_at/begin_after not on the chain, or reversed
    DIVERGED = "Diverged"  # the histories differ and force was not given
    INVALID_HEAD = "InvalidHead"  # the head is not the one the client expected (it moved)
    PRECONDITION_REQUIRED = "PreconditionRequired"  # REST head move without If-Match / If-None-Match
    INVALID_BLOCKS = "InvalidBlocks"  # a block, manifest, tarball or chain rule is broken
    SEED_MISMATCH = "SeedMismatch"  # force never replaces a dataset with a different Seed
    HASH_MISMATCH = "HashMismatch"  # an uploaded body does not hash to its address
    OBJECT_NOT_ALLOWED = "ObjectNotAllowed"  # an object not referenced by the blocks of this session
    TOO_MANY_OBJECTS = "TooManyObjects"  # a page larger than the server allows
    UPLOAD_INVALID = "UploadInvalid"  # at commit: an object missing, or of the wrong size or MD5
    RANGE_NOT_SATISFIABLE = "RangeNotSatisfiable"
    STORAGE_UNAVAILABLE = "StorageUnavailable"
    UNAUTHORIZED = "Unauthorized"
    FORBIDDEN = "Forbidden"
    BUSY = "Busy"
    SHUTTING_DOWN = "ShuttingDown"  # the server is stopping (SIGTERM): run it again, e.g. on another replica
    TIMEOUT = "Timeout"
    UNREACHABLE = "Unreachable"  # client side only: the server or storage could not be reached
    INTERNAL = "Internal"


#: The HTTP status of each code on the REST routes (and of a refused WebSocket handshake).
HTTP_STATUS: dict[ErrorCode, int] = {
    ErrorCode.BAD_MESSAGE: 400,
    ErrorCode.UNEXPECTED_MESSAGE: 400,
    ErrorCode.MESSAGE_TOO_LARGE: 413,
    ErrorCode.UNSUPPORTED_PROTOCOL: 400,
    ErrorCode.INVALID_REQUEST: 400,
    ErrorCode.INVALID_DATASET_NAME: 400,
    ErrorCode.INVALID_HASH: 400,
    ErrorCode.NO_SUCH_ROUTE: 404,
    ErrorCode.METHOD_NOT_ALLOWED: 405,
    ErrorCode.DATASET_NOT_FOUND: 404,
    ErrorCode.BLOCK_NOT_FOUND: 404,
    ErrorCode.OBJECT_NOT_FOUND: 404,
    ErrorCode.INVALID_INTERVAL: 400,
    ErrorCode.DIVERGED: 409,
    ErrorCode.INVALID_HEAD: 412,
    ErrorCode.PRECONDITION_REQUIRED: 428,
    ErrorCode.INVALID_BLOCKS: 400,
    ErrorCode.SEED_MISMATCH: 409,
    ErrorCode.HASH_MISMATCH: 400,
    ErrorCode.OBJECT_NOT_ALLOWED: 403,
    ErrorCode.TOO_MANY_OBJECTS: 400,
    ErrorCode.UPLOAD_INVALID: 400,
    ErrorCode.RANGE_NOT_SATISFIABLE: 416,
    ErrorCode.STORAGE_UNAVAILABLE: 503,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.BUSY: 429,
    ErrorCode.SHUTTING_DOWN: 503,
    ErrorCode.TIMEOUT: 408,
    ErrorCode.UNREACHABLE: 502,
    ErrorCode.INTERNAL: 500,
}

#: The status of a Busy answer given by the connection limit, before any route (503, as a proxy in front
#: would answer); a route's Busy answer is 429.
CONNECTION_LIMIT_STATUS = 503
#: Where several codes share a status, the one the status alone stands for (an answer without a typed
#: body, from a proxy or a refused WebSocket handshake); for every other status, its first code above.
_STATUS_ALONE = {403: ErrorCode.FORBIDDEN, CONNECTION_LIMIT_STATUS: ErrorCode.BUSY}
_CODE_OF_STATUS = {status: code for code, status in reversed(HTTP_STATUS.items())} | _STATUS_ALONE


def code_of_status(status: int) -> ErrorCode:
    """The code an HTTP answer's status stands for when the answer carries no typed error body
    (Internal for a status no code has): the inverse of :data:`HTTP_STATUS`."""
    return _CODE_OF_STATUS.get(status, ErrorCode.INTERNAL)


#: Errors after which retrying the same operation later may succeed.
RETRYABLE = frozenset(
    {
        ErrorCode.UNREACHABLE,
        ErrorCode.STORAGE_UNAVAILABLE,
        ErrorCode.BUSY,
        ErrorCode.SHUTTING_DOWN,
        ErrorCode.TIMEOUT,
        ErrorCode.INTERNAL,
    }
)
#: Errors meaning the histories or the grants refuse the operation: the CLI exits 3 for these.
REJECTIONS = frozenset(
    {
        ErrorCode.DIVERGED,
        ErrorCode.INVALID_HEAD,
        ErrorCode.SEED_MISMATCH,
        ErrorCode.UNAUTHORIZED,
        ErrorCode.FORBIDDEN,
    }
)
#: Errors that are the server's fault (close code 1011); every other code is the peer's (1008).
SERVER_FAULTS = frozenset({ErrorCode.INTERNAL, ErrorCode.STORAGE_UNAVAILABLE})
