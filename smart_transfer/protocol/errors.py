"""The one error vocabulary of the project: every error a WebSocket session or a REST request can end
with, the typed details each code carries, and the HTTP status each code answers with on REST.

The smart protocol sends ``Error{code, message, details}``; REST answers ``{"error": {code, message,
details}}`` with the status from :data:`HTTP_STATUS`. Both documents (AsyncAPI, OpenAPI) are built
from this module, so a client written from them knows what ``details`` holds for each code.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from smart_transfer.protocol.codes import (
    HTTP_STATUS,
    ErrorCode,
)

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
