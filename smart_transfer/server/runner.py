"""Run the server: bind first (so ``--port 0`` works and the URL is known), then serve with uvicorn."""

from __future__ import annotations

import socket
import sys

import uvicorn

from smart_transfer.server.app import create_app
from smart_transfer.server.settings import ServerSettings


def serve(settings: ServerSettings) -> None:
    """Bind, announce where the server listens (one line on stdout), then serve until interrupted."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.host, settings.port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror}") from None
    sock.listen(2048)
    port = sock.getsockname()[1]
    app = create_app(settings, port)
    state = app.state.smart_transfer
    print(f"smart-transfer: listening on {state.base_url} (store: {state.repository.store.describe()})", flush=True)
    config = uvicorn.Config(
        app,
        log_level="warning",
        ws_max_size=settings.max_message_bytes,
        ws_ping_interval=20.0,
        ws_ping_timeout=60.0,
        timeout_keep_alive=30,
        lifespan="on",
    )
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    sys.stdout.flush()
