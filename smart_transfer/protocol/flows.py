"""The ordering rules of both flows, one transition table each (after h11's ``_state.py``).

Everything that decides which message may come next lives here, and it does not know which side it
runs on: the server and the client drive the same ``Connection`` (``connection.py``) over these
tables and so cannot disagree. A message the table does not allow ends the session with
UnexpectedMessage naming the flow, phase, sender and message. A transition that keeps the phase
(``Progress``) is a keep-alive: allowed whenever the table lists it, and absorbed by the receiver.
"""

from __future__ import annotations

from enum import Enum


class Sender(Enum):
    CLIENT = "client"
    SERVER = "server"


class Phase(Enum):
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
TARBALL = "MetadataTarball"

#: pull: (phase, sender, message type) -> next phase
PULL_TRANSITIONS: dict[tuple[Phase, Sender, str], Phase] = {
    (P.AWAIT_REQUEST, C, "DatasetPullRequest"): P.PLANNING,
    (P.PLANNING, S, "DatasetPullResponse"): P.AWAIT_METADATA_REQUEST,
    (P.AWAIT_METADATA_REQUEST, C, "DatasetPullMetadataRequest"): P.SENDING_METADATA,
    (P.AWAIT_METADATA_REQUEST, C, "DatasetPullComplete"): P.DONE,  # nothing to pull
    (P.SENDING_METADATA, S, TARBALL): P.TRANSFER,
    (P.TRANSFER, C, "DatasetPullObjectsTransferRequest"): P.NEGOTIATING,
    (P.NEGOTIATING, S, "DatasetPullObjectsTransferResponse"): P.TRANSFER,
    (P.TRANSFER, C, "Progress"): P.TRANSFER,
    (P.TRANSFER, C, "DatasetPullComplete"): P.DONE,
    # follow: instead of ending, the client asks to be told when the head moves; the increment is
    # then pulled in the same session, from a new request on. Either side keeps an idle session
    # alive with Progress; a client Progress or DatasetPullComplete may cross a HeadMoved in flight.
    (P.AWAIT_METADATA_REQUEST, C, "DatasetPullFollow"): P.FOLLOWING,  # up to date already
    (P.TRANSFER, C, "DatasetPullFollow"): P.FOLLOWING,
    (P.FOLLOWING, C, "Progress"): P.FOLLOWING,
    (P.FOLLOWING, S, "Progress"): P.FOLLOWING,
    (P.FOLLOWING, S, "DatasetPullHeadMoved"): P.HEAD_MOVED,
    (P.FOLLOWING, C, "DatasetPullComplete"): P.DONE,
    (P.HEAD_MOVED, C, "Progress"): P.HEAD_MOVED,
    (P.HEAD_MOVED, C, "DatasetPullRequest"): P.PLANNING,
    (P.HEAD_MOVED, C, "DatasetPullComplete"): P.DONE,
}

#: push: (phase, sender, message type) -> next phase
PUSH_TRANSITIONS: dict[tuple[Phase, Sender, str], Phase] = {
    (P.AWAIT_REQUEST, C, "DatasetPushRequest"): P.PLANNING,
    (P.PLANNING, S, "DatasetPushRequestAccepted"): P.AWAIT_METADATA,
    (P.AWAIT_METADATA, C, TARBALL): P.VALIDATING,
    (P.VALIDATING, S, "DatasetPushMetadataAccepted"): P.TRANSFER,
    (P.TRANSFER, C, "DatasetPushObjectsTransferRequest"): P.NEGOTIATING,
    (P.NEGOTIATING, S, "DatasetPushObjectsTransferResponse"): P.TRANSFER,
    (P.TRANSFER, C, "Progress"): P.TRANSFER,
    (P.TRANSFER, C, "DatasetPushComplete"): P.COMMITTING,
    (P.COMMITTING, S, "Progress"): P.COMMITTING,
    (P.COMMITTING, S, "DatasetPushCompleteConfirmed"): P.DONE,
}

FLOWS = {"pull": PULL_TRANSITIONS, "push": PUSH_TRANSITIONS}
