"""Run the server: bind first (so the URL is known before the app is built), then serve with uvicorn
until SIGTERM or SIGINT, then drain: stop accepting, let running sessions and requests finish for
up to the grace period, end the rest with ShuttingDown, exit. A second signal cuts the drain short
(the sessions end with ShuttingDown at once); every stop ends by the process's exit deadline."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType

import uvicorn

from smart_transfer.server.app import create_app
from smart_transfer.server.connections import bounded_http_protocol
from smart_transfer.server.exit_deadline import EXIT_DEADLINE, EXIT_MARGIN_SECONDS, ExitDeadline
from smart_transfer.server.logs import configure_logging
from smart_transfer.server.settings import ServerSettings
from smart_transfer.server.state import ServerState
from smart_transfer.server.workers import WORKERS_STOP_SECONDS

log = logging.getLogger("smart_transfer.server")
#: Seconds the sessions ended at the end of the grace period get to send their Error and close.
END_SESSIONS_SECONDS = 5.0
#: Seconds a WebSocket peer may take to answer a ping before the connection is dropped.
WS_PING_TIMEOUT_SECONDS = 60.0
#: How often the drain looks whether everything finished.
DRAIN_POLL_SECONDS = 0.05


class DrainingServer(uvicorn.Server):
    """uvicorn's server, with a drain on the first SIGTERM/SIGINT instead of closing at once.

    ``deadline``, when given, is armed whenever a stop begins, with the sum of that stop's own bounds
    (the process's own ``EXIT_DEADLINE`` when serving; none in tests that run a server in-process)."""

    def __init__(self, config: uvicorn.Config, state: ServerState, deadline: ExitDeadline | None = None) -> None:
        super().__init__(config)
        self.state = state
        self.deadline = deadline
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain: asyncio.Task[None] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().startup(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # (not uvicorn's: it would re-raise the signal after the drain; a drained server exits 0)
        if not self.started or self._loop is None:
            # Before start-up has finished (a busy machine can take seconds) nothing was accepted, so
            # there is nothing to drain: uvicorn skips its main loop and shuts down the moment start-up
            # ends (what it accepts meanwhile is answered ShuttingDown). Not forced: a forced shutdown
            # skips the lifespan's end (the worker pool's bounded stop, the index's close), and asyncio
            # then cancels it, which uvicorn logs as a traceback.
            self.should_exit = True
            self.state.begin_drain()
            self._arm(self._connections_seconds() + WORKERS_STOP_SECONDS, "a stop during start-up")
            return
        if self.state.draining:  # a second signal: stop now
            self.should_exit = self.force_exit = True
            self._arm(END_SESSIONS_SECONDS + WORKERS_STOP_SECONDS, "a stop after a second signal")
            return
        self._arm(self.stop_seconds(), "the stop")
        self.state.begin_drain()
        self._loop.call_soon_threadsafe(self._start_drain)

    def _arm(self, seconds: float, waiting_for: str) -> None:
        if self.deadline is not None:
            self.deadline.arm(seconds + EXIT_MARGIN_SECONDS, waiting_for)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await super().shutdown(sockets)
        if self.force_exit and not _lifespan_ended(self.lifespan):
            # uvicorn skips the lifespan's end on a forced stop, and asyncio would then cancel it
            # (which uvicorn logs as a traceback). The sessions end first (ShuttingDown), so none is
            # left using the index when the lifespan closes it; both waits are bounded.
            self.state.end_sessions()
            await self._until_idle(END_SESSIONS_SECONDS)
            await self.lifespan.shutdown()

    def _connections_seconds(self) -> float:
        return float(self.config.timeout_graceful_shutdown or 0)

    def stop_seconds(self) -> float:
        """The longest a drain and the shutdown after it take by their own bounds: the grace period,
        ending the sessions left, uvicorn's wait for their connections, the worker pool's stop."""
        grace = self.state.settings.shutdown_grace_seconds
        return grace + END_SESSIONS_SECONDS + self._connections_seconds() + WORKERS_STOP_SECONDS

    def _start_drain(self) -> None:
        self._drain = asyncio.ensure_future(self.drain())

    def _busy(self) -> bool:
        state = self.state
        return state.sessions.active > 0 or state.requests.active > 0

    async def drain(self) -> None:
        """Stop accepting; wait for running work up to the grace period; end what is left."""
        try:
            await self._drain_sessions()
        finally:  # whatever the drain met, the signal stops the server
            self.should_exit = True

    async def _drain_sessions(self) -> None:
        grace = self.state.settings.shutdown_grace_seconds
        log.warning("shutting down: running sessions get up to %g s to finish", grace)
        for server in self.servers:
            server.close()  # stop accepting: a balancer's next connect goes to another replica
        # Kept-alive connections stay open: requests on them are answered ShuttingDown (Connection:
        # close), except the embedded store's, which running sessions still need.
        await self._until_idle(grace)
        if self._busy():
            log.warning("grace period over: ending %d running session(s)", self.state.sessions.active)
            self.state.end_sessions()
            await self._until_idle(END_SESSIONS_SECONDS)

    async def _until_idle(self, seconds: float) -> None:
        """Wait until no session or request runs, for at most ``seconds``."""
        deadline = time.monotonic() + seconds
        while self._busy() and time.monotonic() < deadline:
            await asyncio.sleep(DRAIN_POLL_SECONDS)


#: The signals that stop the server (uvicorn's own list).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def signals_to(server: DrainingServer) -> Iterator[None]:
    """SIGINT and SIGTERM go to ``server``'s handler from before its event loop starts. Otherwise
    ``asyncio.run`` installs its own SIGINT handler first, and a Ctrl-C landing before uvicorn's (a busy
    machine's start-up) cancels the start-up instead of stopping the server: a fault run once left a
    server running, its Ctrl-C spent. Only the main thread may set handlers; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, server.handle_exit) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _lifespan_ended(lifespan: object) -> bool:
    """Whether uvicorn's lifespan has already run its end (so it is not asked twice)."""
    ended = getattr(lifespan, "shutdown_event", None)
    return isinstance(ended, asyncio.Event) and ended.is_set()


def serve(settings: ServerSettings) -> None:
    """Bind, announce where the server listens (one line on stdout), then serve until stopped."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.host, settings.port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror}") from None
    try:
        _run(settings, sock)
    finally:
        # however serve ended (drained, interrupted while starting, failed), what is left of the way
        # out (the interpreter joins thread pools without a bound) gets a deadline
        EXIT_DEADLINE.arm(EXIT_MARGIN_SECONDS, "the way out after serving")
        sock.close()
    sys.stdout.flush()


def _run(settings: ServerSettings, sock: socket.socket) -> None:
    """Build the app on the bound socket and serve it until stopped."""
    sock.listen(2048)
    port = sock.getsockname()[1]
    sink = configure_logging(settings.log_format, settings.error_log_rate)
    try:
        _serve_app(settings, sock, port)
    finally:
        sink.close()


def _serve_app(settings: ServerSettings, sock: socket.socket, port: int) -> None:
    """Serve the app on the bound, listening socket until stopped."""
    app = create_app(settings, port)
    state: ServerState = app.state.smart_transfer
    print(f"smart-transfer: listening on {state.base_url} (store: {state.repository.store.describe()})", flush=True)
    config = uvicorn.Config(
        app,
        http=bounded_http_protocol(
            settings.header_timeout_seconds, settings.max_connections, settings.busy_retry_after_seconds, state.metrics
        ),
        log_config=None,
        access_log=False,
        ws_max_size=settings.max_message_bytes,
        # pings keep proxies (nginx proxy_read_timeout) from cutting a quiet session
        ws_ping_interval=settings.keepalive_interval_seconds,
        ws_ping_timeout=WS_PING_TIMEOUT_SECONDS,
        timeout_keep_alive=int(max(1, settings.keep_alive_seconds)),
        timeout_graceful_shutdown=int(END_SESSIONS_SECONDS),
        proxy_headers=True,
        forwarded_allow_ips=settings.forwarded_allow_ips,
        lifespan="on",
    )
    server = DrainingServer(config, state, EXIT_DEADLINE)
    with signals_to(server):
        server.run(sockets=[sock])
