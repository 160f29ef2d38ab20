"""The one error vocabulary of the project: every error a WebSocket session or a REST request can end
with, the typed details each code carries, and the HTTP status each code answers with on REST.

The smart protocol sends ``Error{code, message, details}``; REST answers ``{"error": {code, message,
details}}`` with the status from :data:`HTTP_STATUS`. Both documents (AsyncAPI, OpenAPI) are built
from this module, so a client written from them knows what ``details`` holds for each code.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError


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


# -- typed details ---------------------------------------------------------------------------------


class Details(BaseModel):
    """Base of the typed ``details`` of an error."""

    #: defer_build: built on first use (most processes never build most of them; see messages.py).
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class NoDetails(Details):
    """This code carries no details (an empty object)."""


class UnexpectedMessageDetails(Details):
    """The details of UnexpectedMessage: where the session was and what would have been allowed."""

    flow: str = Field(description="pull or push")
    phase: str = Field(description="the phase the session was in")
    message: str = Field(description="the type of the message that was not allowed")
    allowed: list[str] = Field(description="the message types the sender could have sent instead")


class MessageTooLargeDetails(Details):
    """The details of MessageTooLarge: the limit the frame or body went past."""

    limit: int = Field(description="the largest frame or body accepted, in bytes")


class DivergedDetails(Details):
    """The details of Diverged: the head of the other side's chain."""

    remote_head: str = Field(description="the head of the chain the request was compared with")


class InvalidHeadDetails(Details):
    """The details of InvalidHead: the head the client expected and the one the server has."""

    expected: str | None = Field(description="the head the client expected (null: no dataset)")
    actual: str | None = Field(description="the head the server has (null: no dataset)")


class InvalidIntervalDetails(Details):
    """The details of InvalidInterval: the server's head."""

    remote_head: str = Field(description="the server's head")


class InvalidBlocksDetails(Details):
    """The details of InvalidBlocks: the block or manifest at fault."""

    block: str | None = Field(default=None, description="the block at fault, when one is")
    manifest: str | None = Field(default=None, description="the checkpoint manifest at fault, when one is")


class SeedMismatchDetails(Details):
    """The details of SeedMismatch: the dataset id force would have replaced."""

    remote_dataset_id: str = Field(description="the dataset id of the chain that would have been replaced")


class ObjectDetails(Details):
    """The details of an error about one object: its hash."""

    object: str = Field(description="the object's hash")


class TooManyObjectsDetails(Details):
    """The details of TooManyObjects: the most objects one page may name."""

    max_objects_per_page: int


class UploadInvalidDetails(Details):
    """The details of UploadInvalid: the first objects at fault, and how many are."""

    objects: list[str] = Field(description="the first objects at fault, each 'kind/hash: reason'")
    count: int = Field(description="how many objects are at fault in all")


class BusyDetails(Details):
    """The details of Busy: how long to wait before trying again."""

    retry_after: int = Field(description="seconds to wait before trying again")


class RangeNotSatisfiableDetails(Details):
    """The details of RangeNotSatisfiable: the object's size."""

    size: int = Field(description="the object's size in bytes")


class MethodNotAllowedDetails(Details):
    """The details of MethodNotAllowed: the methods the path answers."""

    allowed: list[str] = Field(description="the methods this path answers")


#: The details model of each code; a code not listed carries NoDetails.
DETAILS: dict[ErrorCode, type[Details]] = {
    ErrorCode.UNEXPECTED_MESSAGE: UnexpectedMessageDetails,
    ErrorCode.MESSAGE_TOO_LARGE: MessageTooLargeDetails,
    ErrorCode.DIVERGED: DivergedDetails,
    ErrorCode.INVALID_HEAD: InvalidHeadDetails,
    ErrorCode.INVALID_INTERVAL: InvalidIntervalDetails,
    ErrorCode.INVALID_BLOCKS: InvalidBlocksDetails,
    ErrorCode.SEED_MISMATCH: SeedMismatchDetails,
    ErrorCode.OBJECT_NOT_ALLOWED: ObjectDetails,
    ErrorCode.HASH_MISMATCH: ObjectDetails,
    ErrorCode.TOO_MANY_OBJECTS: TooManyObjectsDetails,
    ErrorCode.UPLOAD_INVALID: UploadInvalidDetails,
    ErrorCode.BUSY: BusyDetails,
    ErrorCode.METHOD_NOT_ALLOWED: MethodNotAllowedDetails,
    ErrorCode.RANGE_NOT_SATISFIABLE: RangeNotSatisfiableDetails,
}


def details_model(code: ErrorCode) -> type[Details]:
    """The model of ``code``'s details."""
    return DETAILS.get(code, NoDetails)


def parse_details(code: ErrorCode, raw: dict[str, Any]) -> Details | None:
    """A received ``details`` object as its typed model (None when it does not fit: a newer peer)."""
    try:
        return details_model(code).model_validate(raw)
    except ValidationError:
        return None


class ProtocolError(Exception):
    """A failure to report to the peer: as an ``Error`` message on a session, or as an error body
    with the code's HTTP status on REST. ``details``, when given, must be the code's details model."""

    def __init__(self, code: ErrorCode, message: str, details: Details | None = None) -> None:
        expected = details_model(code)
        if details is not None and not isinstance(details, expected):
            raise TypeError(f"{code.value} carries {expected.__name__}, not {type(details).__name__}")
        self.code = code
        self.message = message
        self.details = details
        super().__init__(f"{code.value}: {message}")

    @property
    def status(self) -> int:
        """The HTTP status of this error."""
        return HTTP_STATUS[self.code]

    def details_dict(self) -> dict[str, Any]:
        """The details as JSON values (an empty object without details)."""
        return self.details.model_dump(mode="json") if self.details is not None else {}
