"""Connection-level bounds under the ASGI app: every open connection (HTTP, idle kept-alive, and
WebSocket) counts against ``--max-connections``, and a client gets ``--header-timeout`` seconds to
send a request's headers. A subclass of uvicorn's httptools protocol, given to uvicorn as its
``http`` protocol class."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from smart_transfer.protocol.codes import CONNECTION_LIMIT_STATUS, HTTP_STATUS, ErrorCode
from smart_transfer.protocol.errors import BusyDetails, details_json
from smart_transfer.server.metrics import Metrics


def _answer(code: ErrorCode, message: str, details: dict[str, Any], extra: str = "") -> bytes:
    """A complete HTTP answer in the documented error shape, sent before closing the connection."""
    body = orjson.dumps({"error": {"code": code.value, "message": message, "details": details}})
    status = HTTP_STATUS[code] if code is not ErrorCode.BUSY else CONNECTION_LIMIT_STATUS
    reason = {408: "Request Timeout", 503: "Service Unavailable"}.get(status, "Error")
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        f"connection: close\r\n{extra}\r\n"
    )
    return head.encode() + body


def bounded_http_protocol(
    header_timeout: float, max_connections: int, retry_after: int, metrics: Metrics
) -> type[HttpToolsProtocol]:
    """uvicorn's HTTP protocol with the two bounds above."""

    class BoundedHttpProtocol(HttpToolsProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                metrics.busy.labels("connections").inc()
                metrics.connections_closed.labels("too-many").inc()
                message = f"server busy: {max_connections} connections open (limit {max_connections})"
                details = details_json(BusyDetails(retry_after=retry_after))
                transport.write(_answer(ErrorCode.BUSY, message, details, f"retry-after: {retry_after}\r\n"))
                transport.close()
                return
            self._arm()

        def _arm(self) -> None:
            if self._header_timer is None:
                self._header_timer = self.loop.call_later(header_timeout, self._headers_too_slow)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            if self.transport.is_closing():
                return
            metrics.connections_closed.labels("header-timeout").inc()
            message = f"the request headers did not arrive within {header_timeout:g} s"
            self.transport.write(_answer(ErrorCode.TIMEOUT, message, {}))
            self.transport.close()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm()  # the first byte of a request on a kept-alive connection

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return BoundedHttpProtocol
