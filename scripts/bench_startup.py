"""`make bench` case (u): start-up. How long `--version` and `--help` take, how long `pull` and
`push` take from process start to their first connection (a listener on 127.0.0.1 notes the moment
it accepts; the command then fails, which does not matter here), and from process start to their
first WebSocket message (a WebSocket server on 127.0.0.1 accepts the session and notes the moment the
first message arrives, then closes it)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from websockets.sync.server import Server, ServerConnection, serve
from websockets.typing import Subprotocol

#: Runs of each command; the median is reported.
RUNS = 10


def _wall(command: Sequence[str], env: dict[str, str]) -> float:
    started = time.monotonic()
    subprocess.run(command, env=env, capture_output=True, check=True)
    return time.monotonic() - started


def _until_connect(command: Sequence[str], env: dict[str, str], listener: socket.socket) -> float:
    """Seconds from starting ``command`` to the listener accepting its first connection."""
    accepted: list[float] = []

    def accept() -> None:
        connection, _ = listener.accept()
        accepted.append(time.monotonic())
        connection.close()

    waiter = threading.Thread(target=accept)
    waiter.start()
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    waiter.join(30)
    process.kill()
    process.wait(10)
    if not accepted:
        raise RuntimeError(f"{' '.join(command[:3])} never connected")
    return accepted[0] - started


class FirstMessage:
    """A WebSocket server that accepts any session with the protocol's subprotocol and notes when the
    first message of each arrives (then closes it)."""

    def __init__(self) -> None:
        self.arrived: list[float] = []
        self.server: Server = serve(
            self._handle, "127.0.0.1", 0, subprotocols=[Subprotocol(_subprotocol())], compression=None
        )
        self.port = self.server.socket.getsockname()[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _handle(self, connection: ServerConnection) -> None:
        try:
            connection.recv(timeout=30)
            self.arrived.append(time.monotonic())
        finally:
            connection.close()

    def until_first_message(self, command: Sequence[str], env: dict[str, str]) -> float:
        """Seconds from starting ``command`` to its first WebSocket message here."""
        self.arrived.clear()
        started = time.monotonic()
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = started + 30
        while not self.arrived and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.002)
        process.kill()
        process.wait(10)
        if not self.arrived:
            raise RuntimeError(f"{' '.join(command[:3])} never sent a message")
        return self.arrived[0] - started

    def close(self) -> None:
        self.server.shutdown()
        self.thread.join(10)


def _subprotocol() -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from smart_transfer.protocol import SUBPROTOCOL

    return SUBPROTOCOL


def startup_case(
    cli: Sequence[str], env: dict[str, str], work: Path, record: Callable[[str, str, float], None]
) -> None:
    """Record case (u): each measurement RUNS times (``record(case, op, seconds)`` per run)."""
    workspace = work / "ws-startup"
    sample = work / "startup.bin"
    sample.write_bytes(b"start-up")
    subprocess.run(
        [*cli, "add", "tiny", str(sample), "--workspace", str(workspace)], env=env, check=True, capture_output=True
    )
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/tiny"
        commands = {
            "--version": lambda: _wall([*cli, "--version"], env),
            "--help": lambda: _wall([*cli, "--help"], env),
            "pull: first connect": lambda: _until_connect(
                [*cli, "pull", url, "--workspace", str(work / "ws-startup-pull"), "--attempts", "1"], env, listener
            ),
            "push: first connect": lambda: _until_connect(
                [*cli, "push", "tiny", url, "--workspace", str(workspace), "--attempts", "1"], env, listener
            ),
        }
        ws = FirstMessage()
        ws_url = f"http://127.0.0.1:{ws.port}/tiny"
        commands["pull: first message"] = lambda: ws.until_first_message(
            [*cli, "pull", ws_url, "--workspace", str(work / "ws-startup-pull"), "--attempts", "1"], env
        )
        commands["push: first message"] = lambda: ws.until_first_message(
            [*cli, "push", "tiny", ws_url, "--workspace", str(workspace), "--attempts", "1"], env
        )
        try:
            for _ in range(RUNS):  # interleaved, so a noisy moment touches every command alike
                for op, measure in commands.items():
                    record("u", op, measure())
        finally:
            ws.close()
