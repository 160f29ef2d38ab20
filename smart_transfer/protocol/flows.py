"""The ordering rules of both flows, one transition table each (after h11's ``_state.py``).

Everything that decides which message may come next lives here, and it does not know which side it
runs on: the server and the client drive the same ``Connection`` (``connection.py``) over these
tables and so cannot disagree. A message the table does not allow ends the session with
UnexpectedMessage naming the flow, phase, sender and message. A transition that keeps the phase
(``Progress``) is a keep-alive: allowed whenever the table lists it, and absorbed by the receiver.

The tables are keyed by message class, the binary ``MetadataTarball`` included, so they are also the
one list of the protocol's messages: ``MESSAGES`` (what the codec reads) and ``messages_of`` (what the
AsyncAPI document lists per flow) are taken from them.
"""

from __future__ import annotations

from enum import Enum

from smart_transfer.protocol import messages as m
from smart_transfer.protocol.messages import MessageType


class Sender(Enum):
    """Who sends a message: the client or the server."""

    CLIENT = "client"
    SERVER = "server"


class Phase(Enum):
    """Where a session is in its flow; the transition tables say what each phase allows."""

    AWAIT_REQUEST = "AwaitRequest"
    PLANNING = "Planning"  # server decides: plan or error
    AWAIT_METADATA_REQUEST = "AwaitMetadataRequest"  # pull: client asks for the tarball
    SENDING_METADATA = "SendingMetadata"  # pull: server sends the tarball
    AWAIT_METADATA = "AwaitMetadata"  # push: client sends the tarball
    VALIDATING = "Validating"  # push: server checks the blocks
    TRANSFER = "Transfer"  # objects move; pages negotiated
    NEGOTIATING = "Negotiating"  # a page request waits for its answer
    COMMITTING = "Committing"  # push: server verifies and moves head
    FOLLOWING = "Following"  # pull --follow: caught up, waiting for the head to move
    HEAD_MOVED = "HeadMoved"  # pull --follow: the client asks for the increment, or ends
    DONE = "Done"
    FAILED = "Failed"


C, S = Sender.CLIENT, Sender.SERVER
P = Phase
#: (phase, sender, message class) -> next phase
Table = dict[tuple[Phase, Sender, MessageType], Phase]

#: pull: (phase, sender, message class) -> next phase
PULL_TRANSITIONS: Table = {
    (P.AWAIT_REQUEST, C, m.DatasetPullRequest): P.PLANNING,
    (P.PLANNING, S, m.DatasetPullResponse): P.AWAIT_METADATA_REQUEST,
    (P.AWAIT_METADATA_REQUEST, C, m.DatasetPullMetadataRequest): P.SENDING_METADATA,
    (P.AWAIT_METADATA_REQUEST, C, m.DatasetPullComplete): P.DONE,  # nothing to pull
    (P.SENDING_METADATA, S, m.MetadataTarball): P.TRANSFER,
    (P.TRANSFER, C, m.DatasetPullObjectsTransferRequest): P.NEGOTIATING,
    (P.NEGOTIATING, S, m.DatasetPullObjectsTransferResponse): P.TRANSFER,
    (P.TRANSFER, C, m.Progress): P.TRANSFER,
    (P.TRANSFER, C, m.DatasetPullComplete): P.DONE,
    # follow: instead of ending, the client asks to be told when the head moves; the increment is
    # then pulled in the same session, from a new request on. Either side keeps an idle session
    # alive with Progress; a client Progress or DatasetPullComplete may cross a HeadMoved in flight.
    (P.AWAIT_METADATA_REQUEST, C, m.DatasetPullFollow): P.FOLLOWING,  # up to date already
    (P.TRANSFER, C, m.DatasetPullFollow): P.FOLLOWING,
    (P.FOLLOWING, C, m.Progress): P.FOLLOWING,
    (P.FOLLOWING, S, m.Progress): P.FOLLOWING,
    (P.FOLLOWING, S, m.DatasetPullHeadMoved): P.HEAD_MOVED,
    (P.FOLLOWING, C, m.DatasetPullComplete): P.DONE,
    (P.HEAD_MOVED, C, m.Progress): P.HEAD_MOVED,
    (P.HEAD_MOVED, C, m.DatasetPullRequest): P.PLANNING,
    (P.HEAD_MOVED, C, m.DatasetPullComplete): P.DONE,
}

#: push: (phase, sender, message class) -> next phase
PUSH_TRANSITIONS: Table = {
    (P.AWAIT_REQUEST, C, m.DatasetPushRequest): P.PLANNING,
    (P.PLANNING, S, m.DatasetPushRequestAccepted): P.AWAIT_METADATA,
    (P.AWAIT_METADATA, C, m.MetadataTarball): P.VALIDATING,
    (P.VALIDATING, S, m.DatasetPushMetadataAccepted): P.TRANSFER,
    (P.TRANSFER, C, m.DatasetPushObjectsTransferRequest): P.NEGOTIATING,
    (P.NEGOTIATING, S, m.DatasetPushObjectsTransferResponse): P.TRANSFER,
    (P.TRANSFER, C, m.Progress): P.TRANSFER,
    (P.TRANSFER, C, m.DatasetPushComplete): P.COMMITTING,
    (P.COMMITTING, S, m.Progress): P.COMMITTING,
    (P.COMMITTING, S, m.DatasetPushCompleteConfirmed): P.DONE,
}

FLOWS: dict[str, Table] = {"pull": PULL_TRANSITIONS, "push": PUSH_TRANSITIONS}


def messages_of(flow: str) -> list[MessageType]:
    """Every message a session of ``flow`` may carry, in the order the table first names them, and
    ``Error`` last: either side may end any session with it, so no row names it."""
    kinds = dict.fromkeys(kind for (_, _, kind) in FLOWS[flow])
    return [*kinds, m.Error]


#: Every message of the protocol, each once: the one list the codec and the AsyncAPI document read.
MESSAGES: tuple[MessageType, ...] = tuple(dict.fromkeys(kind for flow in FLOWS for kind in messages_of(flow)))
