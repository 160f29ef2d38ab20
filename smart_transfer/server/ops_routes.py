"""Routes for operators and balancers: ``GET /healthz`` (the process answers), ``GET /readyz`` (the
store answers within the readiness timeout, the index is usable, and the server is not shutting
down) and ``GET /metrics`` (Prometheus text format). None takes a request slot, and the liveness and
readiness probes take no token; on a server with tokens a scrape of ``/metrics`` needs a known token
(any grant: Prometheus sends it as ``authorization: {credentials: ...}``) unless ``--metrics-public``
says the numbers may be read by anyone reaching the server (they name no dataset, but tell its load)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from smart_transfer.repo import RepositoryError
from smart_transfer.server.guard import Asking, authenticate
from smart_transfer.server.metrics import CONTENT_TYPE_LATEST
from smart_transfer.server.rest_common import client_of, error_responses
from smart_transfer.server.state import ServerState
from smart_transfer.storage import StorageError

#: Paths of these routes (excluded from the access log: balancers and scrapers poll them).
OPS_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


class Health(BaseModel):
    status: str = Field(description="always ok: the process answers")


class Readiness(BaseModel):
    """Whether the server should be sent traffic, and the state of each thing it needs."""

    ready: bool
    checks: dict[str, str] = Field(description="store, index, server: ok, or why not")


async def _bounded_check(check: Callable[[], None], seconds: float, stalled: str) -> str:
    """``ok``, the check's own error, or ``stalled`` when it has not answered within ``seconds``: the
    check runs on the worker pool, where it may wait behind a store that stopped answering (the thread
    may outlive the answer; the answer must not wait for it)."""
    try:
        async with asyncio.timeout(seconds):
            await asyncio.to_thread(check)
    except (StorageError, RepositoryError) as exc:
        return str(exc)
    except TimeoutError:
        return stalled
    return "ok"


async def readiness(state: ServerState) -> Readiness:
    """Check the store (one bounded call, no retry) and the index side by side, each within the
    readiness timeout (and a second for the thread to report), and whether the server drains."""
    timeout = state.settings.ready_timeout_seconds
    repository = state.repository
    store, index = await asyncio.gather(
        _bounded_check(
            functools.partial(repository.store.check_ready, timeout),
            timeout + 1.0,
            f"storage stopped answering: no answer within {timeout:g} s",
        ),
        _bounded_check(
            repository.check_index,
            timeout + 1.0,
            f"no answer within {timeout:g} s (every worker thread is busy, or the disk stalls)",
        ),
    )
    checks = {"store": store, "index": index, "server": "shutting down" if state.draining else "ok"}
    return Readiness(ready=all(value == "ok" for value in checks.values()), checks=checks)


def ops_router(state: ServerState) -> APIRouter:
    router = APIRouter(tags=["operations"])

    @router.get("/healthz", operation_id="health", summary="The process is up", response_model=Health)
    async def health() -> Health:
        return Health(status="ok")

    @router.get(
        "/readyz",
        operation_id="readiness",
        summary="Ready for traffic: the store answers, the index is usable, the server is not shutting down",
        response_model=Readiness,
        responses={503: {"description": "not ready (the body says why)", "model": Readiness}},
    )
    async def ready() -> JSONResponse:
        report = await readiness(state)
        return JSONResponse(report.model_dump(), status_code=200 if report.ready else 503)

    @router.get(
        "/metrics",
        operation_id="metrics",
        summary="Prometheus metrics (text exposition format)",
        response_class=Response,
        responses={
            200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}},
            **error_responses(),
        },
    )
    async def metrics(request: Request) -> Response:
        if not state.settings.metrics_public:  # the guard's authentication: a draining server is still scraped
            authenticate(state, Asking(request.headers.get("authorization"), client_of(request)))
        return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    return router
