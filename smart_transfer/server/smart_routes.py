"""The Smart Transfer Protocol's WebSocket endpoints: ``/{dataset}/pull`` and ``/{dataset}/push``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from fastapi import APIRouter, WebSocket
from starlette.websockets import WebSocketDisconnect, WebSocketDisconnected

from smart_transfer.model import InvalidDatasetName, ModelError
from smart_transfer.protocol.errors import ErrorCode, ProtocolError
from smart_transfer.repo import RepositoryError
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.server.auth import Access, AuthError
from smart_transfer.server.limits import Busy
from smart_transfer.server.pull_flow import run_pull
from smart_transfer.server.push_flow import run_push
from smart_transfer.server.session import ClientGone, ServerSession
from smart_transfer.server.settings import ServerSettings
from smart_transfer.server.state import ServerState
from smart_transfer.storage import StorageError, StorageUnavailable

log = logging.getLogger("smart_transfer.server")
Flow = Callable[[ServerSession, DatasetRepository, ServerSettings], Awaitable[None]]


def smart_router(state: ServerState) -> APIRouter:
    """WebSocket routes driving the pull and push flows for the server's repository."""
    settings = state.settings
    router = APIRouter()

    async def run(websocket: WebSocket, dataset_name: str, flow_name: str, flow: Flow) -> None:
        session = ServerSession(websocket, flow_name, settings.idle_timeout_seconds, settings.max_message_bytes)
        try:
            await session.accept()
            try:
                dataset = state.repository.dataset(dataset_name)
            except InvalidDatasetName as exc:
                raise ProtocolError(ErrorCode.INVALID_DATASET_NAME, str(exc)) from None
            access = Access.WRITE if flow_name == "push" else Access.READ
            try:
                grant = state.authorizer.check(websocket.headers.get("authorization"), dataset.name, access)
            except AuthError as exc:
                code = ErrorCode.UNAUTHORIZED if exc.status == 401 else ErrorCode.FORBIDDEN
                raise ProtocolError(code, str(exc)) from None
            try:
                with state.sessions.hold(grant.subject if grant is not None else "anonymous"):
                    await asyncio.wait_for(flow(session, dataset, settings), settings.session_timeout_seconds)
            except Busy as exc:
                raise ProtocolError(ErrorCode.BUSY, str(exc), {"retry_after": exc.retry_after}) from None
            except TimeoutError:
                raise ProtocolError(
                    ErrorCode.TIMEOUT, f"session exceeded {settings.session_timeout_seconds:.0f} s"
                ) from None
        except (ClientGone, WebSocketDisconnect, WebSocketDisconnected):
            return
        except ProtocolError as exc:
            await session.fail(exc)
        except StorageUnavailable as exc:
            await session.fail(ProtocolError(ErrorCode.STORAGE_UNAVAILABLE, str(exc)))
        except (StorageError, RepositoryError, ModelError) as exc:
            log.warning("%s %s failed: %s", flow_name, dataset_name, exc)
            await session.fail(ProtocolError(ErrorCode.INTERNAL, str(exc)))
        except Exception:
            log.exception("%s %s failed", flow_name, dataset_name)
            await session.fail(ProtocolError(ErrorCode.INTERNAL, "internal server error"))

    @router.websocket("/{dataset}/pull")
    async def pull(websocket: WebSocket, dataset: str) -> None:
        await run(websocket, dataset, "pull", run_pull)

    @router.websocket("/{dataset}/push")
    async def push(websocket: WebSocket, dataset: str) -> None:
        await run(websocket, dataset, "push", run_push)

    return router
