"""The server never waits for its log sink: with stderr a pipe nobody reads (a stalled collector), the
server keeps answering, and the lines it could not write are counted, not lost silently."""

from __future__ import annotations

import os
import select
import subprocess
import time
from pathlib import Path

import httpx

from smart_transfer.server.logs import LOG_QUEUE_LINES
from tests.conftest import CLI, free_port

#: Requests made while stderr is not read: their access lines fill a pipe's buffer and the sink's queue.
REQUESTS = LOG_QUEUE_LINES + 2000
#: Seconds one request may take (a stalled event loop would take forever).
REQUEST_TIMEOUT = 10.0


def test_a_stalled_stderr_never_stalls_the_server(tmp_path: Path) -> None:
    port = free_port()
    command = [*CLI, "serve", "--host", "127.0.0.1", "--port", str(port), "--root", str(tmp_path / "srv")]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stderr is not None
        ready, _, _ = select.select([process.stdout], [], [], 30)
        assert ready and b"listening on" in process.stdout.readline()
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=REQUEST_TIMEOUT) as client:
            for _ in range(REQUESTS):  # each logs an access line (the health checks are not logged)
                assert client.get("/no-such-dataset").status_code == 404
        os.set_blocking(process.stderr.fileno(), False)
        written = b""
        deadline = time.monotonic() + 10
        while b"dropped" not in written and time.monotonic() < deadline:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=REQUEST_TIMEOUT) as client:
                client.get("/no-such-dataset")  # a line after the drain carries the count
            time.sleep(0.2)
            written += process.stderr.read() or b""
        assert b"earlier line(s) dropped: stderr is slower than the server" in written
    finally:
        process.terminate()
        process.wait(30)
