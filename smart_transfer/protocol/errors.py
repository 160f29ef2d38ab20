"""The one error vocabulary of the project: every error a WebSocket session or a REST request can end
with, the typed details each code carries, and the HTTP status each code answers with on REST.

The smart protocol sends ``Error{code, message, details}``; REST answers ``{"error": {code, message,
details}}`` with the status from :data:`HTTP_STATUS`. Both documents (AsyncAPI, OpenAPI) are built
from this module, so a client written from them knows what ``details`` holds for each code.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct

from smart_transfer.config.values import LONG_MAX
from smart_transfer.protocol.codes import (
    HTTP_STATUS,
    ErrorCode,
)

# -- typed details ---------------------------------------------------------------------------------


class Details(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Base of the typed ``details`` of an error."""


class NoDetails(Details, frozen=True):
    """This code carries no details (an empty object)."""


class UnexpectedMessageDetails(Details, frozen=True):
    """The details of UnexpectedMessage: where the session was and what would have been allowed."""

    flow: Annotated[str, Meta(description="pull or push")]
    phase: Annotated[str, Meta(description="the phase the session was in")]
    message: Annotated[str, Meta(description="the type of the message that was not allowed")]
    allowed: Annotated[list[str], Meta(description="the message types the sender could have sent instead")]


class MessageTooLargeDetails(Details, frozen=True):
    """The details of MessageTooLarge: the limit the frame or body went past."""

    limit: Annotated[int, Meta(ge=0, le=LONG_MAX, description="the largest frame or body accepted, in bytes")]


class DivergedDetails(Details, frozen=True):
    """The details of Diverged: the head of the other side's chain."""

    remote_head: Annotated[str, Meta(description="the head of the chain the request was compared with")]


class InvalidHeadDetails(Details, frozen=True):
    """The details of InvalidHead: the head the client expected and the one the server has."""

    expected: Annotated[str | None, Meta(description="the head the client expected (null: no dataset)")]
    actual: Annotated[str | None, Meta(description="the head the server has (null: no dataset)")]


class InvalidIntervalDetails(Details, frozen=True):
    """The details of InvalidInterval: the server's head."""

    remote_head: Annotated[str, Meta(description="the server's head")]


class InvalidBlocksDetails(Details, frozen=True):
    """The details of InvalidBlocks: the block or manifest at fault."""

    block: Annotated[str | None, Meta(description="the block at fault, when one is")] = None
    manifest: Annotated[str | None, Meta(description="the checkpoint manifest at fault, when one is")] = None


class SeedMismatchDetails(Details, frozen=True):
    """The details of SeedMismatch: the dataset id force would have replaced."""

    remote_dataset_id: Annotated[str, Meta(description="the dataset id of the chain that would have been replaced")]


class ObjectDetails(Details, frozen=True):
    """The details of an error about one object: its hash."""

    object: Annotated[str, Meta(description="the object's hash")]


class TooManyObjectsDetails(Details, frozen=True):
    """The details of TooManyObjects: the most objects one page may name."""

    max_objects_per_page: int


class UploadInvalidDetails(Details, frozen=True):
    """The details of UploadInvalid: the first objects at fault, and how many are."""

    objects: Annotated[list[str], Meta(description="the first objects at fault, each 'kind/hash: reason'")]
    count: Annotated[int, Meta(ge=0, le=LONG_MAX, description="how many objects are at fault in all")]


class BusyDetails(Details, frozen=True):
    """The details of Busy: how long to wait before trying again."""

    retry_after: Annotated[int, Meta(ge=0, le=LONG_MAX, description="seconds to wait before trying again")]


class RangeNotSatisfiableDetails(Details, frozen=True):
    """The details of RangeNotSatisfiable: the object's size."""

    size: Annotated[int, Meta(ge=0, le=LONG_MAX, description="the object's size in bytes")]


class MethodNotAllowedDetails(Details, frozen=True):
    """The details of MethodNotAllowed: the methods the path answers."""

    allowed: Annotated[list[str], Meta(description="the methods this path answers")]


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
        return msgspec.convert(raw, details_model(code))
    except msgspec.ValidationError:
        return None


def details_schemas() -> dict[str, Any]:
    """The JSON schema of every details model, by name, as ``components/schemas`` of both documents."""
    # only the documents need it: a pull or push does not load the schema helpers
    from smart_transfer.protocol.schemas import schema_components

    return schema_components([NoDetails, *{model.__name__: model for model in DETAILS.values()}.values()])


def details_json(details: Details | None) -> dict[str, Any]:
    """``details`` as JSON values (an empty object for none)."""
    return msgspec.to_builtins(details) if details is not None else {}


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
        return details_json(self.details)
