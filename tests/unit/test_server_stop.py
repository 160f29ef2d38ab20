"""The server's stop under real signals, with uvicorn running the runner's DrainingServer: Ctrl-C while
start-up is still running, and a second Ctrl-C during a drain, both end the app's lifespan (where the
worker pool stops and the index closes) and exit without a traceback."""

from __future__ import annotations

import subprocess
import sys
import time

#: The app's lifespan start-up signals its own process (Ctrl-C landing while a busy machine starts the
#: server), then takes a while longer; a running session keeps the drain waiting.
SCRIPT = """
import asyncio, os, signal, socket, sys, threading, time, types
from contextlib import asynccontextmanager
import uvicorn
from fastapi import FastAPI
from smart_transfer.server.runner import DrainingServer

case = sys.argv[1]

@asynccontextmanager
async def lifespan(app):
    if case == "starting":
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.sleep(0.3)
    yield
    print("lifespan ended", flush=True)

state = types.SimpleNamespace(
    draining=False,
    settings=types.SimpleNamespace(shutdown_grace_seconds=60.0),
    sessions=types.SimpleNamespace(active=1),  # a session that would outlast the grace period
    requests=types.SimpleNamespace(active=0),
    end_sessions=lambda: None,
)
state.begin_drain = lambda: setattr(state, "draining", True)
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
server = DrainingServer(uvicorn.Config(FastAPI(lifespan=lifespan), lifespan="on", log_config=None), state)

def twice():
    while not server.started:
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGINT)  # drains: the session could run 60 s more
    while not state.draining:
        time.sleep(0.01)
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGINT)  # stop now

if case == "twice":
    threading.Thread(target=twice, daemon=True).start()
server.run(sockets=[sock])
print("stopped", flush=True)
"""


def _stop(case: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", SCRIPT, case], capture_output=True, text=True, timeout=60, check=False)
    return done, time.monotonic() - started


def test_ctrl_c_during_start_up_ends_the_lifespan_without_a_traceback() -> None:
    done, elapsed = _stop("starting")
    assert done.returncode == 0, done
    assert done.stdout.splitlines() == ["lifespan ended", "stopped"], done
    assert "Traceback" not in done.stderr and "ERROR" not in done.stderr, done.stderr
    assert elapsed < 30, elapsed


def test_a_second_ctrl_c_stops_a_drain_at_once_and_still_ends_the_lifespan() -> None:
    done, elapsed = _stop("twice")
    assert done.returncode == 0, done
    assert done.stdout.splitlines() == ["lifespan ended", "stopped"], done
    assert "Traceback" not in done.stderr and "ERROR" not in done.stderr, done.stderr
    assert elapsed < 30, elapsed  # not the 60 s grace period
