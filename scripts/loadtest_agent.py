"""The load test's SDK agent (`make loadtest`): runs the smart-protocol pulls and pushes of Locust's users
with the async SDK (smart_transfer.client.Client) in one plain asyncio loop, many sessions at once, the
way an async client program would.

Locust runs its users as gevent greenlets; the SDK is asyncio. ``asyncio.run`` inside a greenlet blocks
the hub (and a second greenlet's ``asyncio.run`` finds the first loop running: the running loop is per
thread, not per greenlet), and a CLI process per operation would measure Python's start-up instead of the
server. So the Locust file starts agents like this one as child processes (no gevent, none of its monkey-patching)
and talks to them over pipes: one JSON line per operation in on stdin, one JSON line per result out on
stdout. The seconds reported are the operation's own, timed inside the agent around the SDK call (Busy
waits included), so a slow hand-off to Locust does not count against the server.

Beside that end-to-end time, each answer gives the time of the admitted attempt alone (``admitted_seconds``:
from the start of the first attempt after the server's last Busy refusal to the operation's end, the
end-to-end time when nothing was refused; None when the last attempt was refused) and how many attempts
the server refused Busy (``refused``). The SDK retries
Busy itself (``retry_when_busy``, waiting the Retry-After, 2 s or more), so its end-to-end time is mostly
waiting once the server refuses; the admitted time is what the server's admission promises to keep short.
The agent times each attempt by wrapping the SDK's retry helper in this process only (see
``_timed_retry_when_busy``): the SDK's own retry policy, fallback and answers are unchanged.

    request: {"id": 1, "op": "pull"|"pull_fresh"|"push", "url": ..., "workspace": DIR, "token": ...,
              "dataset": NAME (push), "files": N (push)}
    answer:  {"id": 1, "ok": true, "seconds": 0.12, "admitted_seconds": 0.12, "refused": 0, "busy": 0,
              "head": ..., "error": null}
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypeVar

from smart_transfer.cli.commands.workspace import run_add
from smart_transfer.client import Client
from smart_transfer.client import client as sdk_client
from smart_transfer.errors import ErrorCode, RemoteError, SmartTransferError
from smart_transfer.repo import Workspace

#: Each pushed object's size range (bytes): small objects, so the sessions, not the bytes, are measured.
SMALL_OBJECT = (512, 4096)
#: Client bounds for the run: an answer the server owes for longer than this is a hang, not a slow reply.
ANSWER_TIMEOUT = 60.0

R = TypeVar("R")


@dataclass
class Timing:
    """One operation's clock: when it started and ended (around the SDK call, workspace opening included)
    and when each of its attempts started, with whether the server refused that attempt Busy."""

    started: float = field(default_factory=time.perf_counter)
    ended: float | None = None
    attempts: list[tuple[float, bool]] = field(default_factory=list)

    def seconds(self) -> float:
        """End to end: refused attempts and the waits after them included."""
        return (self.ended or time.perf_counter()) - self.started

    def admitted_seconds(self) -> float | None:
        """The admitted attempt's time: from the start of the first attempt after the last Busy refusal to
        the end, or the whole operation when its first attempt was admitted (so the two figures differ by
        exactly what the refusals cost; a fallback to the simple protocol after an admitted smart attempt
        belongs to that admitted operation). None when the last attempt was refused: nothing was admitted."""
        refused = [index for index, (_, busy) in enumerate(self.attempts) if busy]
        if not refused:
            return self.seconds()
        if refused[-1] + 1 == len(self.attempts):
            return None
        return (self.ended or time.perf_counter()) - self.attempts[refused[-1] + 1][0]

    def refused(self) -> int:
        return sum(1 for _, busy in self.attempts if busy)


#: The operation the current task runs. Every operation runs in its own task (``_serve_one``), so a
#: context variable keeps concurrent ones apart.
TIMING: ContextVar[Timing] = ContextVar("timing")
_SDK_RETRY_WHEN_BUSY = sdk_client.retry_when_busy


def _timed_retry_when_busy(operation: Callable[[], Awaitable[R]], warn: Callable[[str], None]) -> Awaitable[R]:
    """The SDK's own Busy retry, each attempt timed into TIMING: the admitted attempt's time needs the
    moment it started, which no SDK callback tells (``warn`` comes before the wait, with the delay rounded).
    Installed in place of ``smart_transfer.client.client.retry_when_busy`` in this agent process only."""
    timing = TIMING.get()

    async def attempt() -> R:
        index = len(timing.attempts)
        timing.attempts.append((time.perf_counter(), False))
        try:
            return await operation()
        except RemoteError as exc:
            if exc.code is ErrorCode.BUSY:
                timing.attempts[index] = (timing.attempts[index][0], True)
            raise

    return _SDK_RETRY_WHEN_BUSY(attempt, warn)


# the Client looks the helper up in its module at every call, so this reaches pulls and pushes alike
sdk_client.retry_when_busy = _timed_retry_when_busy  # type: ignore[assignment]


def _add_files(workspace: Path, dataset: str, count: int) -> str:
    """Append ``count`` small random files as blocks (what `smart-transfer add` does); the new local head."""
    inbox = workspace / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    files = []
    for index in range(count):
        path = inbox / f"{time.time_ns()}-{index}.bin"
        path.write_bytes(os.urandom(SMALL_OBJECT[0] + int.from_bytes(os.urandom(2)) % SMALL_OBJECT[1]))
        files.append(str(path))
    run_add(argparse.Namespace(dataset=dataset, files=files, records=1, workspace=str(workspace)))
    for name in files:
        Path(name).unlink()
    with Workspace(workspace) as opened:
        tip = opened.dataset(dataset).tip()
    assert tip is not None
    return str(tip.head)


async def _transfer(request: dict[str, Any], warn: Any) -> dict[str, Any]:
    """The operation itself; raises what the SDK raises."""
    workspace = Path(request["workspace"])
    if request["op"] == "push":
        head = await asyncio.to_thread(_add_files, workspace, request["dataset"], int(request["files"]))
        result: dict[str, Any] = {"head": head}
    else:
        result = {}
    timing = TIMING.get()
    timing.started = time.perf_counter()  # a push's local `add` above is not the server's time
    try:
        with Workspace(workspace) as opened:
            client = Client(opened, token=request["token"], warn=warn, answer_timeout=ANSWER_TIMEOUT)
            if request["op"] == "push":
                summary = await client.push(request["dataset"], request["url"])
            else:
                summary = await client.pull(request["url"])
    finally:
        timing.ended = time.perf_counter()
    result.update(objects=summary.objects_transferred, remote_head=summary.new_head)
    return result


async def _serve_one(request: dict[str, Any], out: asyncio.Lock, answers: TextIO) -> None:
    busy: list[str] = []
    answer: dict[str, Any] = {"id": request["id"], "ok": False, "error": None}
    timing = Timing()
    TIMING.set(timing)
    try:
        answer.update(await _transfer(request, busy.append))
        answer["ok"] = True
    except SmartTransferError as exc:
        answer["error"] = f"{type(exc).__name__} {exc.code.value}"
        answer["message"] = str(exc)[:300]
    except Exception as exc:  # every failure is a result to count, never the end of the agent
        answer["error"] = type(exc).__name__
        answer["message"] = str(exc)[:300]
    answer.update(seconds=timing.seconds(), admitted_seconds=timing.admitted_seconds(), refused=timing.refused())
    answer["busy"] = sum("busy" in line for line in busy)
    if not timing.attempts and answer["ok"]:  # the timing hook was not reached: a loud failure, not a wrong figure
        answer.update(ok=False, error="agent timing hook not reached", message="retry_when_busy was not called")
    if request["op"] == "pull_fresh":  # bounded disk: a fresh workspace is thrown away after its pull
        await asyncio.to_thread(shutil.rmtree, request["workspace"], True)
    async with out:
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


async def main() -> None:
    """Read requests until stdin closes; each runs as its own task."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out = asyncio.Lock()
    # answers go to the original stdout; whatever else writes to stdout (`add` prints its new head) goes
    # to stderr, so it cannot land in the middle of an answer line
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    answers.write(json.dumps({"ready": True}) + "\n")  # imports done: Locust starts its users after this
    answers.flush()
    tasks: set[asyncio.Task[None]] = set()
    while line := await reader.readline():
        task = asyncio.create_task(_serve_one(json.loads(line), out, answers))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    for task in tasks:
        task.cancel()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
