"""An embedded ``serve`` on a free loopback port for the measuring scripts (bench_short_ab.py,
options_walk.py): started, waited for until /healthz answers (bounded), killed by the caller."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path

#: Seconds a server may take to answer /healthz before the script gives up.
START_TIMEOUT = 30.0


def free_port() -> int:
    """An ephemeral loopback port free now (servers refuse --port 0)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(command: list[str], root: Path, env: Mapping[str, str] | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``command`` (the CLI, e.g. ``[python, -m, smart_transfer.cli]``) ``serve`` with ``root`` on a
    free port; returns the process and its URL once /healthz answers. SystemExit when it does not within
    START_TIMEOUT (the process is killed)."""
    port = free_port()
    args = [*command, "serve", "--host", "127.0.0.1", "--port", str(port), "--root", str(root)]
    server = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1):
                return server, url
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise SystemExit(f"{Path(command[-1]).name}: the server did not start within {START_TIMEOUT:.0f} s")
