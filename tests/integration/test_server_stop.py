"""A stop signal ends the server whenever it lands, including while start-up still runs (on a busy
machine start-up takes seconds, and a Ctrl-C or SIGTERM then is normal), and a Ctrl-C while the
command itself is still starting is one line, never a traceback."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

import uvicorn

from smart_transfer.server.app import create_app
from smart_transfer.server.runner import DrainingServer
from smart_transfer.server.settings import ServerSettings
from tests.conftest import CLI

#: Seconds a stopped server may take to end (start-up, then shutdown, with nothing to drain).
STOP_BOUND_SECONDS = 30.0


def test_a_stop_signal_during_start_up_ends_the_server(tmp_path: Path) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    app = create_app(ServerSettings(root=tmp_path / "server"), sock.getsockname()[1])
    state = app.state.smart_transfer
    server: DrainingServer | None = None

    async def signalled_during_start_up(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":  # the signal lands while the lifespan's start-up runs
            assert server is not None
            server.handle_exit(signal.SIGINT, None)
            await asyncio.sleep(0.5)  # and start-up goes on for a while, as on a busy machine
        await app(scope, receive, send)

    config = uvicorn.Config(signalled_during_start_up, lifespan="on", log_config=None)
    server = DrainingServer(config, state)
    # a thread, so the test's own signal handlers stay; uvicorn installs none off the main thread
    runner = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    runner.start()
    runner.join(STOP_BOUND_SECONDS)
    try:
        assert not runner.is_alive(), "the server kept running after a signal during its start-up"
        assert server.should_exit and server.started
    finally:
        server.should_exit = server.force_exit = True
        runner.join(STOP_BOUND_SECONDS)
        sock.close()


def test_ctrl_c_while_the_command_starts_is_one_line(tmp_path: Path) -> None:
    # SIGINT lands in the command's imports: the interpreter is told to raise it at the first
    # bytecode of the CLI's module, through a start-up hook in a sitecustomize of its own (which also
    # restores Python's own handler: a parent that ignores SIGINT, as a test runner's worker may, would
    # pass that on, and the signal would do nothing)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import os, signal, sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'smart_transfer.cli.commands':\n"
        "            signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "            os.kill(os.getpid(), signal.SIGINT)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Interrupt())\n"
    )
    paths = [str(hook), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run([*CLI, "--version"], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 130, done
    assert done.stderr == "smart-transfer: error: interrupted\n", done.stderr
