"""Every message of the protocol as a typed model. JSON text frames carry them, tagged by ``type``;
the metadata tarballs travel as binary frames (see ``tarball.py``). The AsyncAPI document's payload
schemas are generated from these classes."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from smart_transfer.model import InvalidMultihash, Multihash, ObjectKind, ObjectRef
from smart_transfer.model.multihash import HASH_PATTERN
from smart_transfer.protocol.errors import ErrorCode

MAX_ERROR_TEXT = 2000
#: Most blocks a request may name as known to the client (its chain, sampled back from its head).
MAX_KNOWN_BLOCKS = 128


def _type_is_required(schema: dict[str, Any]) -> None:
    """Every message carries its ``type`` on the wire, so the documents say it is required."""
    if "type" in schema.get("properties", {}):
        schema["required"] = sorted({*schema.get("required", []), "type"})


class Message(BaseModel):
    """Base of all messages: strict, frozen, unknown fields refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, json_schema_extra=_type_is_required)


def _check_hash(value: str | None) -> str | None:
    if value is not None:
        try:
            Multihash.parse(value)
        except InvalidMultihash as exc:
            raise ValueError(str(exc)) from None
    return value


HashText = Annotated[str, Field(pattern=HASH_PATTERN, description="multihash as multibase base16 text")]
KnownBlocks = Annotated[
    list[HashText],
    Field(
        max_length=MAX_KNOWN_BLOCKS,
        description="blocks of the client's chain, newest first: its head's 64 predecessors, then every "
        "power-of-two distance back, then its Seed. When the histories diverged and force is given, the "
        "server sends only the blocks after the newest of these it has (the last common block).",
    ),
]


class TransferPlan(Message):
    """What an operation will move."""

    num_blocks: int = Field(ge=0)
    num_objects: int = Field(ge=0)
    bytes_in_objects: int = Field(ge=0)


class ObjectFile(Message):
    """One object: its kind (folder), content hash and size; ``md5`` (base64) for uploads."""

    kind: Literal["data", "checkpoints"]
    physical_hash: HashText
    size: int = Field(ge=0)
    md5: str | None = Field(default=None, pattern=r"^[A-Za-z0-9+/]{22}==$")

    _valid_hash = field_validator("physical_hash")(_check_hash)

    @classmethod
    def of(cls, ref: ObjectRef, md5: str | None = None) -> ObjectFile:
        """The message form of an object reference."""
        return cls(kind=ref.kind.value, physical_hash=str(ref.physical_hash), size=ref.size, md5=md5)

    def ref(self) -> ObjectRef:
        """The object reference this names (the hash was validated when the message was built)."""
        return ObjectRef(ObjectKind(self.kind), Multihash.parse(self.physical_hash), self.size)


class HttpRequest(Message):
    """A presigned request: make it exactly as given (method, URL, headers) before ``expires_at``."""

    method: Literal["GET", "PUT"]
    url: str
    headers: dict[str, str]
    expires_at: int = Field(description="Unix time in seconds after which the URL no longer works (0: never)")


# -- common ------------------------------------------------------------------------------------------


class Error(Message):
    """The last message of a failed session, sent just before the close frame. ``details`` is typed by
    ``code`` (see x-error-codes: the details schema, close code and HTTP status of every code)."""

    type: Literal["Error"] = "Error"
    code: ErrorCode
    message: str = Field(max_length=MAX_ERROR_TEXT)
    details: dict[str, Any] = Field(default_factory=dict)


class Progress(Message):
    """Keep-alive with progress, sent during long transfers and long verifications."""

    type: Literal["Progress"] = "Progress"
    objects_done: int = Field(ge=0)
    bytes_done: int = Field(ge=0)


# -- pull ----------------------------------------------------------------------------------------------


class DatasetPullRequest(Message):
    """Client: send me the blocks after ``begin_after`` (None: from the start) up to ``stop_at``
    (None: the head)."""

    type: Literal["DatasetPullRequest"] = "DatasetPullRequest"
    begin_after: HashText | None = None
    stop_at: HashText | None = None
    force_update_if_diverged: bool = False
    known_blocks: KnownBlocks = Field(default_factory=list)

    _valid_hashes = field_validator("begin_after", "stop_at")(_check_hash)


class DatasetPullResponse(Message):
    """Server: the pull is possible; this is what it moves. ``head`` is the block it ends at."""

    type: Literal["DatasetPullResponse"] = "DatasetPullResponse"
    head: HashText
    begin_after: HashText | None
    transfer_plan: TransferPlan
    max_objects_per_page: int = Field(ge=1, description="most objects one transfer request may name")


class DatasetPullMetadataRequest(Message):
    """Client: send the blocks (answered by one binary frame, a gzip tar holding their block pack)."""

    type: Literal["DatasetPullMetadataRequest"] = "DatasetPullMetadataRequest"


class DatasetPullObjectsTransferRequest(Message):
    """Client: give me download URLs for these objects (one page)."""

    type: Literal["DatasetPullObjectsTransferRequest"] = "DatasetPullObjectsTransferRequest"
    object_files: list[ObjectFile] = Field(min_length=1)


class PullObjectTransfer(Message):
    object_file: ObjectFile
    download: HttpRequest


class DatasetPullObjectsTransferResponse(Message):
    """Server: one presigned GET per requested object, in request order."""

    type: Literal["DatasetPullObjectsTransferResponse"] = "DatasetPullObjectsTransferResponse"
    object_transfers: list[PullObjectTransfer]


class DatasetPullComplete(Message):
    """Client: everything arrived and was verified; the session can end."""

    type: Literal["DatasetPullComplete"] = "DatasetPullComplete"


# -- push ----------------------------------------------------------------------------------------------


class DatasetPushRequest(Message):
    """Client: I will push on top of ``current_head`` (None: the dataset is new). ``transfer_plan``
    is an upper bound of what follows: the blocks tarball may carry no more blocks than it names,
    and expand to no more than those blocks and the manifests among its objects can take."""

    type: Literal["DatasetPushRequest"] = "DatasetPushRequest"
    current_head: HashText | None = None
    transfer_plan: TransferPlan
    force_update_if_diverged: bool = False
    known_blocks: KnownBlocks = Field(default_factory=list)

    _valid_hash = field_validator("current_head")(_check_hash)


class DatasetPushRequestAccepted(Message):
    """Server: go ahead; send the blocks after ``common_block`` as one binary frame (a gzip tar, one pack)."""

    type: Literal["DatasetPushRequestAccepted"] = "DatasetPushRequestAccepted"
    current_head: HashText | None
    common_block: HashText | None = Field(
        default=None,
        description="the newest of the request's known_blocks on the server's chain (null: none, or no dataset)",
    )


class DatasetPushMetadataAccepted(Message):
    """Server: the blocks are valid on top of the current head; negotiate the objects next."""

    type: Literal["DatasetPushMetadataAccepted"] = "DatasetPushMetadataAccepted"
    num_blocks: int = Field(ge=0)
    num_objects: int = Field(ge=0)
    max_objects_per_page: int = Field(ge=1, description="most objects one transfer request may name")


class DatasetPushObjectsTransferRequest(Message):
    """Client: how do I deliver these objects (one page)? Each carries its MD5 for the URL."""

    type: Literal["DatasetPushObjectsTransferRequest"] = "DatasetPushObjectsTransferRequest"
    object_files: list[ObjectFile] = Field(min_length=1)


class SkipUpload(Message):
    """The server already has this object."""

    type: Literal["SkipUpload"] = "SkipUpload"


class HttpUpload(Message):
    """Upload with this presigned PUT (Content-MD5 is bound into it)."""

    type: Literal["HttpUpload"] = "HttpUpload"
    request: HttpRequest


class PushObjectTransfer(Message):
    object_file: ObjectFile
    transfer: Annotated[SkipUpload | HttpUpload, Field(discriminator="type")]


class DatasetPushObjectsTransferResponse(Message):
    """Server: per requested object, SkipUpload or HttpUpload, in request order."""

    type: Literal["DatasetPushObjectsTransferResponse"] = "DatasetPushObjectsTransferResponse"
    object_transfers: list[PushObjectTransfer]


class DatasetPushComplete(Message):
    """Client: all uploads are done; verify them and commit."""

    type: Literal["DatasetPushComplete"] = "DatasetPushComplete"


class DatasetPushCompleteConfirmed(Message):
    """Server: every object checked, head moved by compare-and-swap to ``new_head``."""

    type: Literal["DatasetPushCompleteConfirmed"] = "DatasetPushCompleteConfirmed"
    old_head: HashText | None
    new_head: HashText


AnyMessage = Annotated[
    Error
    | Progress
    | DatasetPullRequest
    | DatasetPullResponse
    | DatasetPullMetadataRequest
    | DatasetPullObjectsTransferRequest
    | DatasetPullObjectsTransferResponse
    | DatasetPullComplete
    | DatasetPushRequest
    | DatasetPushRequestAccepted
    | DatasetPushMetadataAccepted
    | DatasetPushObjectsTransferRequest
    | DatasetPushObjectsTransferResponse
    | DatasetPushComplete
    | DatasetPushCompleteConfirmed,
    Field(discriminator="type"),
]


class MetadataTarball:
    """The binary frame of a flow: a gzip tar of one block pack and manifests (not a JSON message)."""

    type = "MetadataTarball"

    def __init__(self, data: bytes) -> None:
        self.data = data
