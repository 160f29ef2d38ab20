"""Every message of the protocol as a typed model. JSON text frames carry them, tagged by ``type``;
the metadata tarballs travel as binary frames (see ``tarball.py``). Which of them a flow uses, and in
what order, is the transition tables' to say (``flows.py``): the codec and the AsyncAPI document
take the list from there. The document's payload schemas are generated from these classes."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import msgspec
from msgspec import Meta, Struct, field

from smart_transfer.config.values import LONG_MAX
from smart_transfer.model import InvalidMultihash, Multihash, ObjectKind, ObjectRef
from smart_transfer.model.multihash import HASH_PATTERN
from smart_transfer.protocol import MAX_PEERS
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.storage.base import PresignedRequest
from smart_transfer.storage.parts import MAX_PARTS

MAX_ERROR_TEXT = 2000
#: Most blocks a request may name as known to the client (its chain, sampled back from its head).
MAX_KNOWN_BLOCKS = 128
#: Longest peer URL an announcement may carry.
MAX_PEER_URL = 512
#: A peer's dataset URL: http(s), a host (and port), path segments ending with the dataset name; no
#: credentials, query or fragment. Objects are at ``{url}/{kind}/{hash}``.
PEER_URL_PATTERN = r"^https?://[A-Za-z0-9.:\[\]-]+(/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)+$"


class Record(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Base of every part of a message: frozen, unknown fields refused; decoding is strict (no silent
    type coercion: ``"1"`` is not an integer). msgspec rather than pydantic: it imports in about a
    tenth of the time (every pull and push pays it at start-up) and validates on decode alone. Each
    subclass repeats ``frozen=True``: msgspec inherits it, type checkers do not."""


class Message(Record, frozen=True, tag_field="type", tag=True):
    """Base of all messages: a record tagged on the wire by ``type``, its class name."""

    @property
    def type(self) -> str:
        """The message's ``type`` tag."""
        return name_of(type(self))


def _check_hash(*values: str | None) -> None:
    """Each given hash names a supported multihash (the pattern checks only its text form)."""
    for value in values:
        if value is not None:
            try:
                Multihash.parse(value)
            except InvalidMultihash as exc:
                raise ValueError(str(exc)) from None


HashText = Annotated[str, Meta(pattern=HASH_PATTERN, description="multihash as multibase base16 text")]
KnownBlocks = Annotated[
    list[HashText],
    Meta(
        max_length=MAX_KNOWN_BLOCKS,
        description="blocks of the client's chain, newest first: its head's 64 predecessors, then every "
        "power-of-two distance back, then its Seed. When the histories diverged and force is given, the "
        "server sends only the blocks after the newest of these it has (the last common block).",
    ),
]


PeerUrl = Annotated[
    str,
    Meta(
        pattern=PEER_URL_PATTERN,
        max_length=MAX_PEER_URL,
        description="where a workspace serves this dataset's objects read-only (`smart-transfer peer serve`): "
        "GET {url}/{kind}/{hash}; no credentials, query or fragment",
    ),
]


class PeerSource(Record, frozen=True):
    """A workspace that announced it serves this dataset's objects, and the head it had then. Never
    trusted: the client verifies every object's hash and size, and falls back to storage."""

    url: PeerUrl
    head: HashText


def check_peer_url(url: str) -> None:
    """Refuse (ValueError) a URL that a pull request could not announce: PeerUrl's own rule, so that the
    client says so before it sends one, rather than the server answering BadMessage."""
    try:
        msgspec.convert(url, PeerUrl)
    except msgspec.ValidationError as exc:
        raise ValueError(f"a pull cannot announce this URL: {exc}") from None


Md5Text = Annotated[str, Meta(pattern=r"^[A-Za-z0-9+/]{22}==$", description="an MD5 digest, base64 (Content-MD5)")]


class TransferPlan(Record, frozen=True):
    """What an operation will move."""

    num_blocks: Annotated[int, Meta(ge=0, le=LONG_MAX)]
    num_objects: Annotated[int, Meta(ge=0, le=LONG_MAX)]
    bytes_in_objects: Annotated[int, Meta(ge=0, le=LONG_MAX)]


class ObjectFile(Record, frozen=True):
    """One object: its kind (folder), content hash and size. For uploads, ``md5`` (base64) of the
    whole object, or, for an object larger than the server's ``multipart_threshold``, ``part_md5s``:
    the MD5 of each of its parts, in order (the parts the ``part_size`` of DatasetPushMetadataAccepted
    makes, see MultipartUpload). Offered in a push with neither, it only asks whether the server holds
    the object committed (answered SkipUpload or NotHeld; nothing is started or signed): how a client
    pushes blocks whose objects it does not hold itself, e.g. after a partial pull."""

    kind: Literal["data", "checkpoints"]
    physical_hash: HashText
    size: Annotated[int, Meta(ge=0, le=LONG_MAX)]
    md5: Md5Text | None = None
    part_md5s: Annotated[list[Md5Text], Meta(min_length=1, max_length=MAX_PARTS)] | None = None

    def __post_init__(self) -> None:
        _check_hash(self.physical_hash)

    @classmethod
    def of(cls, ref: ObjectRef, md5: str | None = None, part_md5s: list[str] | None = None) -> ObjectFile:
        """The message form of an object reference."""
        return cls(
            kind=ref.kind.value, physical_hash=str(ref.physical_hash), size=ref.size, md5=md5, part_md5s=part_md5s
        )

    def ref(self) -> ObjectRef:
        """The object reference this names (the hash was validated when the message was built)."""
        return ObjectRef(ObjectKind(self.kind), Multihash.parse(self.physical_hash), self.size)

    @property
    def asks(self) -> bool:
        """Whether this push offer only asks whether the server holds the object committed (it carries
        neither ``md5`` nor ``part_md5s``: nothing to bind into an upload URL)."""
        return self.md5 is None and self.part_md5s is None


class HttpRequest(Record, frozen=True):
    """A presigned request: make it exactly as given (method, URL, headers) before ``expires_at``. A GET
    may add a ``Range`` header: large objects are downloaded as parallel ranges of the same URL."""

    method: Literal["GET", "PUT"]
    url: str
    headers: dict[str, str]
    expires_at: Annotated[
        int, Meta(ge=0, le=LONG_MAX, description="Unix time in seconds after which the URL no longer works (0: never)")
    ]

    @classmethod
    def presigned(cls, signed: PresignedRequest) -> HttpRequest:
        """The message form of a request a store presigned (checked: GET or PUT)."""
        fields = {"method": signed.method, "url": signed.url, "headers": signed.headers}
        return msgspec.convert({**fields, "expires_at": signed.expires_at}, cls)


# -- common ------------------------------------------------------------------------------------------


class Error(Message, frozen=True):
    """The last message of a failed session, sent just before the close frame. ``details`` is typed by
    ``code`` (see x-error-codes: the details schema, close code and HTTP status of every code)."""

    code: ErrorCode
    message: Annotated[str, Meta(max_length=MAX_ERROR_TEXT)]
    details: dict[str, Any] = field(default_factory=dict)


class Progress(Message, frozen=True):
    """Keep-alive with progress, sent during long transfers and long verifications."""

    objects_done: Annotated[int, Meta(ge=0, le=LONG_MAX)]
    bytes_done: Annotated[int, Meta(ge=0, le=LONG_MAX)]


# -- pull ----------------------------------------------------------------------------------------------


class DatasetPullRequest(Message, frozen=True):
    """Client: send me the blocks after ``begin_after`` (None: from the start) up to ``stop_at``
    (None: the head)."""

    begin_after: HashText | None = None
    stop_at: HashText | None = None
    force_update_if_diverged: bool = False
    known_blocks: KnownBlocks = field(default_factory=list)
    announce: Annotated[
        PeerUrl | None,
        Meta(
            description="this client serves the dataset's objects at this URL once the pull is complete: from its "
            "DatasetPullComplete or DatasetPullFollow on, the server lists it to other readers for its peer TTL",
        ),
    ] = None

    def __post_init__(self) -> None:
        _check_hash(self.begin_after, self.stop_at)


class DatasetPullResponse(Message, frozen=True):
    """Server: the pull is possible; this is what it moves. ``head`` is the block it ends at. The plan
    counts every object the new blocks reference: a client that chooses part of them moves less."""

    head: HashText
    begin_after: HashText | None
    transfer_plan: TransferPlan
    max_objects_per_page: Annotated[
        int, Meta(ge=1, le=LONG_MAX, description="most objects one transfer request may name")
    ]
    peers: Annotated[
        list[PeerSource],
        Meta(
            max_length=MAX_PEERS,
            description="live peers that announced this dataset (not the client's own announcement): the client may "
            "fetch objects from them first, verifying each, and ask for storage URLs only for the rest",
        ),
    ] = field(default_factory=list)


class DatasetPullMetadataRequest(Message, frozen=True):
    """Client: send the blocks (answered by one binary frame, a gzip tar holding their block pack)."""


class DatasetPullObjectsTransferRequest(Message, frozen=True):
    """Client: give me download URLs for these objects (one page). Any objects the chain up to the head
    references: the client chooses which (a partial pull asks only for those it wants; the chain itself
    always comes whole in the metadata tarball)."""

    object_files: Annotated[list[ObjectFile], Meta(min_length=1)]


class PullObjectTransfer(Record, frozen=True):
    """One object of a pull page and the presigned GET that fetches it."""

    object_file: ObjectFile
    download: HttpRequest


class DatasetPullObjectsTransferResponse(Message, frozen=True):
    """Server: one presigned GET per requested object, in request order."""

    object_transfers: list[PullObjectTransfer]


class DatasetPullComplete(Message, frozen=True):
    """Client: everything arrived and was verified; the session can end. (While following: stop.)"""


class DatasetPullFollow(Message, frozen=True):
    """Client: everything arrived and was verified, as with DatasetPullComplete, but keep the session
    open and say when the dataset's head moves (``pull --follow``)."""


class DatasetPullHeadMoved(Message, frozen=True):
    """Server, while following: the head moved to ``head``. The client pulls the increment with a new
    DatasetPullRequest in the same session, or ends it with DatasetPullComplete."""

    head: HashText


# -- push ----------------------------------------------------------------------------------------------


class DatasetPushRequest(Message, frozen=True, kw_only=True):
    """Client: I will push on top of ``current_head`` (None: the dataset is new), moving head to
    ``target_head``. ``transfer_plan`` is an upper bound of what follows: the blocks tarball may carry
    no more blocks than it names, and expand to no more than those blocks and the manifests among its
    objects can take."""

    current_head: HashText | None = None
    transfer_plan: TransferPlan
    force_update_if_diverged: bool = False
    known_blocks: KnownBlocks = field(default_factory=list)
    target_head: Annotated[
        HashText | None,
        Meta(
            description="the client's head, where the push moves the remote head (added after 0.1.0; optional, so "
            "older clients still push). The pushed blocks must end at it. When it is an older block of the remote's "
            "chain and no block is sent, a forced push moves the remote head back to it, as the REST path's forced PUT "
            "of refs/head does; without it, a push only ever adds blocks",
        ),
    ] = None

    def __post_init__(self) -> None:
        _check_hash(self.current_head, self.target_head)


class DatasetPushRequestAccepted(Message, frozen=True):
    """Server: go ahead; send the blocks after ``common_block`` as one binary frame (a gzip tar, one pack)."""

    current_head: HashText | None
    common_block: Annotated[
        HashText | None,
        Meta(
            description="the newest of the request's known_blocks on the server's chain (null: none, or no dataset)",
        ),
    ] = None


class DatasetPushMetadataAccepted(Message, frozen=True):
    """Server: the blocks are valid on top of the current head; negotiate the objects next. Objects
    larger than ``multipart_threshold`` are uploaded in parts of ``part_size`` bytes (the last one
    shorter), grown to the smallest whole MiB that keeps an object within 1024 parts: name each
    part's MD5 in ``part_md5s``. One transfer request names at most 1024 parts in all."""

    num_blocks: Annotated[int, Meta(ge=0, le=LONG_MAX)]
    num_objects: Annotated[int, Meta(ge=0, le=LONG_MAX)]
    max_objects_per_page: Annotated[
        int, Meta(ge=1, le=LONG_MAX, description="most objects one transfer request may name")
    ]
    multipart_threshold: Annotated[
        int, Meta(ge=1, le=LONG_MAX, description="objects larger than this many bytes are uploaded in parts")
    ]
    part_size: Annotated[
        int, Meta(ge=1, le=LONG_MAX, description="the size of those parts, before growing for very large objects")
    ]


class DatasetPushObjectsTransferRequest(Message, frozen=True):
    """Client: how do I deliver these objects (one page)? Each carries its MD5 (or its parts' MD5s) for
    the URLs; one with neither only asks whether the server holds it committed (SkipUpload or NotHeld,
    with no upload started and no URL signed: a client that pushes blocks whose objects it does not
    hold asks first, and stops before any upload when one is not held)."""

    object_files: Annotated[list[ObjectFile], Meta(min_length=1)]


class SkipUpload(Message, frozen=True):
    """The server already has this object (asked without MD5s: it holds it committed)."""


class NotHeld(Message, frozen=True):
    """The answer to an object offered without ``md5`` and ``part_md5s`` that the server does not hold
    committed: no upload was started and no URL signed. ``stored``: its store holds a copy of the
    object's size that no committed block references (an interrupted push's), which only an upload
    offer, with the object's MD5s, can have checked. Added after 0.1.0; a server older than it refuses
    such an offer (BadMessage)."""

    stored: bool = False


class HttpUpload(Message, frozen=True):
    """Upload with this presigned PUT (Content-MD5 is bound into it)."""

    request: HttpRequest


class UploadPart(Record, frozen=True):
    """One part to upload: PUT bytes ``[(part_number - 1) * part_size, part_number * part_size)`` of the
    object with this presigned request (the part's Content-MD5 is bound into it)."""

    part_number: Annotated[int, Meta(ge=1, le=MAX_PARTS)]
    request: HttpRequest


class MultipartUpload(Message, frozen=True):
    """Upload this object in parts: PUT each part of ``parts`` (in parallel, any order). Parts the
    store already holds with the promised MD5 (from an interrupted earlier push) are not listed: a
    resumed push sends only the rest. Asked again, the server lists the parts still missing with
    fresh URLs. The server assembles the parts when the push completes and checks the result (the
    ETag the parts' MD5s make, and the size) before it moves head."""

    upload_id: Annotated[str, Meta(min_length=1, max_length=1024)]
    part_size: Annotated[int, Meta(ge=1, le=LONG_MAX)]
    parts: Annotated[list[UploadPart], Meta(max_length=MAX_PARTS)]

    @property
    def expires_at(self) -> int:
        """When the first of its URLs expires (0: none left to use)."""
        return min((part.request.expires_at for part in self.parts), default=0)


class PushObjectTransfer(Record, frozen=True):
    """One object of a push page and how to send it: skip it, one presigned PUT, or parts; or, for an
    object offered without MD5s, that the server does not hold it (NotHeld)."""

    object_file: ObjectFile
    transfer: SkipUpload | HttpUpload | MultipartUpload | NotHeld


class DatasetPushObjectsTransferResponse(Message, frozen=True):
    """Server: per requested object, in request order, SkipUpload, HttpUpload or MultipartUpload (for
    an object offered with its MD5s), SkipUpload or NotHeld (for one offered without)."""

    object_transfers: list[PushObjectTransfer]


class DatasetPushComplete(Message, frozen=True):
    """Client: all uploads are done; verify them and commit."""


class DatasetPushCompleteConfirmed(Message, frozen=True):
    """Server: every object checked, head moved by compare-and-swap to ``new_head``."""

    old_head: HashText | None
    new_head: HashText


class MetadataTarball:
    """The blocks of a flow: a gzip tar of one block pack and manifests (``tarball.py``). A message
    like the others, except that it travels as a binary frame rather than tagged JSON."""

    __slots__ = ("data",)
    type: ClassVar[str] = "MetadataTarball"

    def __init__(self, data: bytes) -> None:
        self.data = data


#: Anything a session carries: a JSON message or the binary tarball.
SessionMessage = Message | MetadataTarball
#: The class of one: the key of the transition tables (``flows.py``).
MessageType = type[Message] | type[MetadataTarball]


def name_of(kind: MessageType) -> str:
    """The name ``kind`` has on the wire (its ``type`` tag), in the documents and in errors."""
    if issubclass(kind, Message):
        tag = kind.__struct_config__.tag
        if not isinstance(tag, str):
            raise ValueError(f"{kind.__name__} is not a message of a flow (it has no type tag)")
        return tag
    return kind.type
