"""`make bench` case (u): start-up. How long `--version` and `--help` take, and how long `pull` and
`push` take from process start to their first connection (a listener on 127.0.0.1 notes the moment
it accepts; the command then fails, which does not matter here)."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

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
        for _ in range(RUNS):  # interleaved, so a noisy moment touches every command alike
            for op, measure in commands.items():
                record("u", op, measure())
