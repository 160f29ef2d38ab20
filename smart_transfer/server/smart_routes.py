"""The Smart Transfer Protocol's WebSocket endpoints: ``/{dataset}/pull`` and ``/{dataset}/push``
(and, for any other path, a session that ends at once with NoSuchRoute)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from fastapi import APIRouter, WebSocket
from starlette.websockets import WebSocketDisconnect, WebSocketDisconnected

from smart_transfer.protocol.connection import PeerError
from smart_transfer.protocol.errors import ErrorCode, ProtocolError
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.server.auth import Access
from smart_transfer.server.errors import as_protocol_error
from smart_transfer.server.pull_flow import run_pull
from smart_transfer.server.push_flow import run_push
from smart_transfer.server.session import ClientGone, ServerSession
from smart_transfer.server.settings import ServerSettings
from smart_transfer.server.state import ServerState

Flow = Callable[[ServerSession, DatasetRepository, ServerSettings], Awaitable[None]]
FLOWS: dict[str, tuple[Flow, Access]] = {"pull": (run_pull, Access.READ), "push": (run_push, Access.WRITE)}


def smart_router(state: ServerState) -> APIRouter:
    """WebSocket routes driving the pull and push flows for the server's repository."""
    settings = state.settings
    router = APIRouter()

    async def authorized(session: ServerSession, websocket: WebSocket, dataset_name: str, flow_name: str) -> None:
        await session.accept()
        dataset = state.repository.dataset(dataset_name)
        flow, access = FLOWS[flow_name]
        grant = state.authorizer.check(websocket.headers.get("authorization"), dataset.name, access)
        with state.sessions.hold(grant.subject if grant is not None else "anonymous"):
            try:
                await asyncio.wait_for(flow(session, dataset, settings), settings.session_timeout_seconds)
            except TimeoutError:
                raise ProtocolError(
                    ErrorCode.TIMEOUT, f"session exceeded {settings.session_timeout_seconds:.0f} s"
                ) from None

    async def run(websocket: WebSocket, dataset_name: str, flow_name: str) -> None:
        session = ServerSession(websocket, flow_name, settings.idle_timeout_seconds, settings.max_message_bytes)
        try:
            await authorized(session, websocket, dataset_name, flow_name)
        except (ClientGone, WebSocketDisconnect, WebSocketDisconnected):
            return
        except PeerError:
            await session.close()  # the client said why it stopped; answer its close
        except Exception as exc:
            await session.fail(as_protocol_error(exc))

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

    return router
