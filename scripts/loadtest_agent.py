"""The load test's SDK agent (`make loadtest`): runs the smart-protocol pulls and pushes of Locust's users
with the async SDK (smart_transfer.client.Client) in one plain asyncio loop, many sessions at once, the
way an async client program would.

Locust runs its users as gevent greenlets; the SDK is asyncio. ``asyncio.run`` inside a greenlet blocks
the hub (and a second greenlet's ``asyncio.run`` finds the first loop running: the running loop is per
thread, not per greenlet), and a CLI process per operation would measure Python's start-up instead of the
server. So the Locust file starts agents like this one as child processes (no gevent, no monkey-patching)
and talks to them over pipes: one JSON line per operation in on stdin, one JSON line per result out on
stdout. The seconds reported are the operation's own, timed inside the agent around the SDK call (Busy
waits included), so a slow hand-off to Locust does not count against the server.

    request: {"id": 1, "op": "pull"|"pull_fresh"|"push", "url": ..., "workspace": DIR, "token": ...,
              "dataset": NAME (push), "files": N (push)}
    answer:  {"id": 1, "ok": true, "seconds": 0.12, "busy": 0, "head": ..., "error": null}
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
from pathlib import Path
from typing import Any, TextIO

from smart_transfer.cli.commands.workspace import run_add
from smart_transfer.client import Client
from smart_transfer.errors import SmartTransferError
from smart_transfer.repo import Workspace

#: Each pushed object's size range (bytes): small objects, so the sessions, not the bytes, are measured.
SMALL_OBJECT = (512, 4096)
#: Client bounds for the run: an answer the server owes for longer than this is a hang, not a slow reply.
ANSWER_TIMEOUT = 60.0


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
    started = time.perf_counter()
    with Workspace(workspace) as opened:
        client = Client(opened, token=request["token"], warn=warn, answer_timeout=ANSWER_TIMEOUT)
        if request["op"] == "push":
            summary = await client.push(request["dataset"], request["url"])
        else:
            summary = await client.pull(request["url"])
    result.update(seconds=time.perf_counter() - started, objects=summary.objects_transferred)
    result["remote_head"] = summary.new_head
    return result


async def _serve_one(request: dict[str, Any], out: asyncio.Lock, answers: TextIO) -> None:
    busy: list[str] = []
    answer: dict[str, Any] = {"id": request["id"], "ok": False, "error": None}
    started = time.perf_counter()
    try:
        answer.update(await _transfer(request, busy.append))
        answer["ok"] = True
    except SmartTransferError as exc:
        answer["error"] = f"{type(exc).__name__} {exc.code.value}"
        answer["message"] = str(exc)[:300]
    except Exception as exc:  # every failure is a result to count, never the end of the agent
        answer["error"] = type(exc).__name__
        answer["message"] = str(exc)[:300]
    answer.setdefault("seconds", time.perf_counter() - started)
    answer["busy"] = sum("busy" in line for line in busy)
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
