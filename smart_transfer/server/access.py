"""One access-log line and one count per REST request (sessions log their own line, with their
outcome: see smart_routes). The operations routes are counted but not logged: they are polled."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from smart_transfer.server.logs import log_access
from smart_transfer.server.metrics import Metrics
from smart_transfer.server.ops_routes import OPS_PATHS


class AccessLog:
    """ASGI middleware: method, path, status, bytes sent, duration and client of every request."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        status, sent = 500, 0

        async def sending(message: Message) -> None:
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.metrics.requests.labels(scope["method"], str(status)).inc()
            if scope["path"] not in OPS_PATHS:
                client = scope.get("client")
                log_access(
                    "request",
                    method=scope["method"],
                    path=scope["path"][:300],
                    status=status,
                    bytes=sent,
                    client=client[0] if client else "unknown",
                    seconds=round(time.monotonic() - started, 3),
                )
