"""The server's stop under real signals, with uvicorn running the runner's DrainingServer as `serve`
does: Ctrl-C while start-up is still running, Ctrl-C before uvicorn's own handlers are set, and a second
Ctrl-C during a drain all end the app's lifespan (where the worker pool stops and the index closes) and
exit without a traceback; a stop stuck past its bounds ends at the exit deadline."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

#: The app's lifespan start-up signals its own process (Ctrl-C landing while a busy machine starts the
#: server), then takes a while longer; a running session keeps the drain waiting.
SCRIPT = """
import asyncio, contextlib, os, signal, socket, sys, threading, time, types
from contextlib import asynccontextmanager
import uvicorn
from fastapi import FastAPI
import smart_transfer.server.runner as runner
from smart_transfer.server.exit_deadline import EXIT_DEADLINE
from smart_transfer.server.runner import DrainingServer, signals_to

case = sys.argv[1]
if case == "stuck":  # small bounds, so the deadline comes soon
    runner.END_SESSIONS_SECONDS = runner.WORKERS_STOP_SECONDS = runner.EXIT_MARGIN_SECONDS = 0.5

@asynccontextmanager
async def lifespan(app):
    if case == "starting":
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.sleep(0.3)
    yield
    if case == "stuck":
        time.sleep(120)  # a stop stuck where nothing bounds it
    print("lifespan ended", flush=True)

state = types.SimpleNamespace(
    draining=False,
    settings=types.SimpleNamespace(shutdown_grace_seconds=0.0 if case == "stuck" else 60.0),
    # a session that would outlast the grace period (none when stuck: that stop is at once)
    sessions=types.SimpleNamespace(active=0 if case == "stuck" else 1),
    requests=types.SimpleNamespace(active=0),
    end_sessions=lambda: None,
)
state.begin_drain = lambda: setattr(state, "draining", True)
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
config = uvicorn.Config(FastAPI(lifespan=lifespan), lifespan="on", log_config=None, timeout_graceful_shutdown=1)
server = DrainingServer(config, state, EXIT_DEADLINE)

def twice():
    while not server.started:
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGINT)  # drains: the session could run 60 s more
    while not state.draining:
        time.sleep(0.01)
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGINT)  # stop now

def once():
    while not server.started:
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGINT)

if case == "early":  # Ctrl-C inside asyncio.run, before uvicorn's own handlers are set
    original = DrainingServer.capture_signals

    @contextlib.contextmanager
    def late(self):
        os.kill(os.getpid(), signal.SIGINT)
        with original(self):
            yield

    DrainingServer.capture_signals = late
if case == "twice":
    threading.Thread(target=twice, daemon=True).start()
if case == "stuck":
    threading.Thread(target=once, daemon=True).start()
with signals_to(server):
    server.run(sockets=[sock])
print("stopped", flush=True)
"""


def _stop(case: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", SCRIPT, case], capture_output=True, text=True, timeout=60, check=False)
    return done, time.monotonic() - started


#: Ctrl-C while the lifespan starts; Ctrl-C inside asyncio.run before uvicorn's own handlers; two
#: Ctrl-Cs during a drain that a running session would keep going for 60 s.
CLEAN_STOPS = ["starting", "early", "twice"]


@pytest.mark.parametrize("case", CLEAN_STOPS)
def test_every_stop_ends_the_lifespan_and_exits_without_a_traceback(case: str) -> None:
    done, elapsed = _stop(case)
    assert done.returncode == 0, done
    assert done.stdout.splitlines() == ["lifespan ended", "stopped"], done
    assert "Traceback" not in done.stderr and "ERROR" not in done.stderr, done.stderr
    assert elapsed < 30, elapsed  # for "twice": not the 60 s grace period


def test_a_stop_stuck_past_its_bounds_ends_at_the_deadline_with_one_line() -> None:
    done, elapsed = _stop("stuck")
    assert done.returncode == 1, done
    assert done.stdout.splitlines() == [], done  # neither the lifespan's end nor serve's return came
    # grace 0 + sessions 0.5 + connections 1 + workers 0.5 + margin 0.5
    assert done.stderr.splitlines()[-1] == "smart-transfer: error: the stop took over 2.5 s; exiting", done.stderr
    assert elapsed < 60, elapsed  # not the stuck 120 s
