"""The one request guard every face of the server passes through (smart WebSocket sessions, REST reads and
writes, Delta Sharing, the web view and the protected operations routes): the server is not draining, the
credentials name a known token, its grant covers the dataset asked for, and the request takes one
concurrency slot while it runs. The guard only decides, by raising (ProtocolError ShuttingDown,
AuthError 401/403, Busy); each face renders that decision in its own shape through the one error map
(``server.errors.as_protocol_error`` and ``protocol.codes.HTTP_STATUS``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from smart_transfer.server.auth import Access, Grant
from smart_transfer.server.limits import ConcurrencyLimit
from smart_transfer.server.state import ServerState, limit_subject


@dataclass(frozen=True)
class Asking:
    """What the guard needs to know of one request or session: its Authorization header value (a web
    view cookie is turned into one), the client's address, and, when it names one, the dataset and the
    access it wants (without a dataset, any known token passes), and what kind of request it is."""

    authorization: str | None
    client: str | None
    dataset: str | None = None
    access: Access = Access.READ
    #: The kind of request (method and route) its duration is a sample of for the request limit's pace;
    #: None: not timed (a session times itself when it ends: its kind is known only then).
    operation: str | None = None


@dataclass(frozen=True)
class Admitted:
    """The guard's yes: the token's grant (None on a server without tokens) and whom the limits count."""

    grant: Grant | None
    subject: str


def authenticate(state: ServerState, asking: Asking) -> Admitted:
    """Authentication and grant alone (for an answer that holds no slot and is given while the server
    drains: a metric scrape). Raises AuthError 401 (no or unknown token) or 403 (grant missing)."""
    if asking.dataset is None:
        grant = state.authorizer.subject(asking.authorization)
    else:
        grant = state.authorizer.check(asking.authorization, asking.dataset, asking.access)
    return Admitted(grant, limit_subject(grant, asking.client))


@asynccontextmanager
async def admitted(
    state: ServerState, asking: Asking, slots: ConcurrencyLimit | None = None
) -> AsyncIterator[Admitted]:
    """The whole guard: not draining (ShuttingDown), ``authenticate`` (in memory: an unknown token is told
    401, not busy), not overloaded (Busy: blocking work already waits too long for a thread), then one
    slot of ``slots`` (the request limit unless a session asks for the session limit) for as long as
    the block runs; Busy when none is free."""
    state.refuse_if_draining()
    admission = authenticate(state, asking)
    state.refuse_if_overloaded()
    async with (slots or state.requests).hold(admission.subject, asking.operation):
        yield admission
