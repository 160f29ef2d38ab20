"""Run a peer: bind first (so ``--port 0`` works and the URL is known), print where it serves, then
serve until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket

from aiohttp import web

from smart_transfer.peer.app import PeerApp
from smart_transfer.peer.settings import PeerSettings

#: Seconds running transfers get to finish when the peer stops.
PEER_SHUTDOWN_SECONDS = 5.0


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (OSError naming the address when it cannot be had)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(1024)
    return sock


async def _serve(settings: PeerSettings, sock: socket.socket) -> None:
    runner = web.AppRunner(PeerApp(settings).application(), access_log=None, shutdown_timeout=PEER_SHUTDOWN_SECONDS)
    await runner.setup()
    try:
        await web.SockSite(runner, sock).start()
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        url = f"http://{host}:{sock.getsockname()[1]}"
        print(
            f"smart-transfer peer: serving {settings.workspace} at {url} (announce it: pull --announce {url})",
            flush=True,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()


def serve(settings: PeerSettings) -> None:
    """Serve ``settings.workspace``'s objects until stopped."""
    sock = bind(settings.host, settings.port)
    with contextlib.closing(sock):
        asyncio.run(_serve(settings, sock))
