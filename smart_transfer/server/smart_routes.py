"""The Smart Transfer Protocol's WebSocket endpoints: ``/{dataset}/pull`` and ``/{dataset}/push``
(and, for any other path, a session that ends at once with NoSuchRoute). Every session ends with
one access-log line and is counted by flow and outcome."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from fastapi import APIRouter, WebSocket
from starlette.websockets import WebSocketDisconnect, WebSocketDisconnected

from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.connection import PeerError
from smart_transfer.protocol.errors import ProtocolError
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.server.auth import Access
from smart_transfer.server.errors import as_protocol_error
from smart_transfer.server.guard import Asking, admitted
from smart_transfer.server.logs import log_access
from smart_transfer.server.metrics import SESSION_FLOW
from smart_transfer.server.pull_flow import run_pull
from smart_transfer.server.push_flow import run_push
from smart_transfer.server.session import ClientGone, ServerSession
from smart_transfer.server.state import ServerState

Flow = Callable[[ServerSession, DatasetRepository, ServerState], Awaitable[None]]
FLOWS: dict[str, tuple[Flow, Access]] = {"pull": (run_pull, Access.READ), "push": (run_push, Access.WRITE)}


@dataclass
class SessionRecord:
    """What the access log says of one session."""

    flow: str
    dataset: str
    client: str
    subject: str = "-"
    outcome: str = "ok"
    started: float = 0.0


def client_host(websocket: WebSocket) -> str:
    """The client's address (the balancer's X-Forwarded-For when it is a trusted proxy)."""
    return websocket.client.host if websocket.client is not None else "unknown"


async def _authorized(state: ServerState, session: ServerSession, websocket: WebSocket, record: SessionRecord) -> None:
    """Accept, authorize and run one session within the session limits and timeout."""
    settings = state.settings
    await session.accept()
    dataset = state.repository.dataset(record.dataset)
    flow, access = FLOWS[record.flow]
    asking = Asking(websocket.headers.get("authorization"), record.client, dataset.name, access)
    active = state.metrics.sessions_active.labels(record.flow)
    SESSION_FLOW.set(record.flow)  # this connection's own task: its store calls count for its flow
    async with admitted(state, asking, state.sessions) as admission:
        record.subject = session.subject = admission.subject
        session.grant = admission.grant
        active.inc()
        started = state.sessions.clock()  # the limit's own clock, as a request's hold is timed
        try:
            async with asyncio.timeout(settings.session_timeout_seconds):
                await state.until_shutdown(flow(session, dataset, state))
        except TimeoutError:
            raise ProtocolError(
                ErrorCode.TIMEOUT, f"session exceeded {settings.session_timeout_seconds:.0f} s"
            ) from None
        finally:
            active.dec()
        if not session.followed:  # a follower's duration is its wait for news, not work
            state.sessions.observe_hold(pace_kind(record.flow, session), state.sessions.clock() - started)


def pace_kind(flow: str, session: ServerSession) -> str:
    """The kind a finished session is timed as (server/adaptive.py): its flow and the decade of the
    metadata bytes it exchanged, which grow with the blocks and objects it moved."""
    exchanged = session.bytes_received + session.bytes_sent
    return f"{flow} {10 ** (len(str(exchanged)) - 1)}+ B"


async def _end(session: ServerSession, exc: BaseException) -> str:
    """End a failed session as its error says; the outcome the access log records."""
    if isinstance(exc, ClientGone | WebSocketDisconnect):
        return f"disconnected:{exc.code}" if exc.code else "disconnected"
    if isinstance(exc, WebSocketDisconnected):
        return "disconnected"
    if isinstance(exc, PeerError):
        await session.close()  # the client said why it stopped; answer its close
        return f"client:{exc.code.value}"
    error = as_protocol_error(exc)
    await session.fail(error)
    return error.code.value


def smart_router(state: ServerState) -> APIRouter:
    """WebSocket routes driving the pull and push flows for the server's repository."""
    settings = state.settings
    router = APIRouter()

    async def run(websocket: WebSocket, dataset_name: str, flow_name: str) -> None:
        session = ServerSession(websocket, flow_name, settings.idle_timeout_seconds, settings.max_message_bytes)
        record = SessionRecord(flow_name, dataset_name[:100], client_host(websocket), started=time.monotonic())
        try:
            await _authorized(state, session, websocket, record)
        except Exception as exc:
            record.outcome = await _end(session, exc)
        finally:
            state.metrics.sessions.labels(flow_name, record.outcome).inc()
            state.metrics.session_bytes.labels(flow_name, "received").inc(session.bytes_received)
            state.metrics.session_bytes.labels(flow_name, "sent").inc(session.bytes_sent)
            log_access(
                "session",
                flow=record.flow,
                dataset=record.dataset,
                client=record.client,
                subject=record.subject,
                outcome=record.outcome,
                seconds=round(time.monotonic() - record.started, 3),
            )

    @router.websocket("/{dataset}/pull")
    async def pull(websocket: WebSocket, dataset: str) -> None:
        await run(websocket, dataset, "pull")

    @router.websocket("/{dataset}/push")
    async def push(websocket: WebSocket, dataset: str) -> None:
        await run(websocket, dataset, "push")

    @router.websocket("/{path:path}")
    async def no_such_route(websocket: WebSocket, path: str) -> None:
        session = ServerSession(websocket, "pull", settings.idle_timeout_seconds, settings.max_message_bytes)
        await websocket.accept(subprotocol=(websocket.scope.get("subprotocols") or [None])[0])
        await session.fail(
            ProtocolError(ErrorCode.NO_SUCH_ROUTE, f"no session endpoint at /{path[:200]} (use /DATASET/pull or /push)")
        )
        state.metrics.sessions.labels("none", ErrorCode.NO_SUCH_ROUTE.value).inc()
        log_access("session", flow="none", path=f"/{path[:200]}", client=client_host(websocket), outcome="NoSuchRoute")

    return router
