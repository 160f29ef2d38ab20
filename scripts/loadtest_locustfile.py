"""Locust users of the load test (`make loadtest`; started by scripts/loadtest.py, which passes the
configuration in LT_* variables). Five kinds of user, each with its own token:

- ``UpToDatePuller``: pulls a dataset it already has (the common case: nothing to move);
- ``FreshPuller``: pulls a 10-object dataset into a fresh workspace;
- ``Pusher``: appends 1-3 small objects (one block each) to its own dataset and pushes;
- ``RestReader``: the simple protocol's reads: list datasets, a block, an object (streamed);
- ``SharingReader``: Delta Sharing: list shares, list tables, query a table.

Pulls and pushes run in the SDK agents (scripts/loadtest_agent.py: why there, and not in a greenlet, is
said there); REST and Delta Sharing go through Locust's FastHttpUser. Every refusal is classified for
the report: the documented ones (HTTP 429 with Retry-After, the protocol's Busy) against the rest
(5xx, a reset or refused connection, no answer in time).

Locust's own figures per kind are end to end: an SDK operation's include its Busy waits. Beside them,
ADMITTED keeps per kind the times of the admitted operations only (an SDK operation's admitted attempt,
timed by the agent; a REST answer other than a refusal: after a 429 the user's next request is a new
attempt), and the refusals: the report's p50/p95/p99 of admitted operations come from there.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import gevent
from gevent.event import AsyncResult
from loadtest_agent import ANSWER_TIMEOUT  # locust puts this directory on sys.path
from locust import FastHttpUser, User, between, events, task
from locust.env import Environment

from smart_transfer.client.client import BUSY_ATTEMPTS, MAX_BUSY_DELAY
from smart_transfer.server.settings import ServerSettings
from smart_transfer.transfer.backoff import backoff_delay, longest_backoff

CONFIG: dict[str, Any] = json.loads(Path(os.environ["LT_CONFIG"]).read_text())
WAIT = between(float(CONFIG["wait_min"]), float(CONFIG["wait_max"]))
#: Locust gives up on an agent's answer after this long and counts a hang: longer than the SDK may
#: legitimately take, waiting out the server's Busy answers (BUSY_ATTEMPTS, each retry after at most
#: the longest backoff from the server's default Retry-After) and then its last attempt's answer bound.
BUSY_WAIT_BOUND = sum(
    longest_backoff(attempt, ServerSettings.busy_retry_after_seconds, MAX_BUSY_DELAY)
    for attempt in range(1, BUSY_ATTEMPTS)
)
HANG_SECONDS = BUSY_WAIT_BOUND + ANSWER_TIMEOUT + 30.0
#: How refusals and failures were answered, for the report's verdict.
OUTCOMES: Counter[str] = Counter()
#: The first few messages of each kind of failure (``examples.json`` beside the outcomes): what a count
#: in the report means.
EXAMPLES: dict[str, list[str]] = {}
MAX_EXAMPLES = 5
#: Per kind (Locust's name): "admitted", the seconds of each admitted operation; "refused", the attempts
#: refused with the documented Busy / 429 / 503 + Retry-After; "unanswered", operations with no answer to
#: tell (an SDK hang, a REST reset or refused connection): not admitted as far as anyone can tell, and
#: counted against the verdict through OUTCOMES.
ADMITTED: dict[str, dict[str, Any]] = {}
_TOKENS = itertools.count()
_IDS = itertools.count(1)


def next_token() -> tuple[int, str]:
    """A user's own token (one subject per user, so per-token limits apply per user, as in production)."""
    index = next(_TOKENS)
    tokens: list[str] = CONFIG["tokens"]
    return index, tokens[index % len(tokens)]


class Agents:
    """The SDK agent processes, and the answers each greenlet waits for."""

    def __init__(self, count: int) -> None:
        self.waiting: dict[int, AsyncResult] = {}
        self.processes = [self._start() for _ in range(count)]
        self.turn = itertools.cycle(self.processes)

    def _start(self) -> subprocess.Popen[bytes]:
        script = str(Path(__file__).with_name("loadtest_agent.py"))
        process = subprocess.Popen(
            [sys.executable, script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert process.stdout is not None
        if b"ready" not in process.stdout.readline():  # the SDK imported before any user starts
            raise RuntimeError("an SDK agent did not start")
        gevent.spawn(self._read, process)
        return process

    def _read(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            try:
                answer = json.loads(line)
            except ValueError:  # not an answer: its waiter counts a hang after HANG_SECONDS
                OUTCOMES["agent wrote a line that is no answer"] += 1
                continue
            waiter = self.waiting.pop(answer["id"], None)
            if waiter is not None:
                waiter.set(answer)

    def call(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """Send ``request`` to the next agent; its answer, or None when none came in HANG_SECONDS."""
        request["id"] = next(_IDS)
        waiter = AsyncResult()
        self.waiting[request["id"]] = waiter
        process = next(self.turn)
        assert process.stdin is not None
        process.stdin.write((json.dumps(request) + "\n").encode())
        process.stdin.flush()
        try:
            return dict(waiter.get(timeout=HANG_SECONDS))
        except gevent.Timeout:
            self.waiting.pop(request["id"], None)
            return None

    def stop(self) -> None:
        for process in self.processes:
            if process.stdin is not None:
                process.stdin.close()
        for process in self.processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


AGENTS: list[Agents] = []


@events.init.add_listener
def _start_agents(environment: Environment, **_: Any) -> None:
    AGENTS.append(Agents(int(CONFIG["agents"])))


@events.quitting.add_listener
def _write_outcomes(environment: Environment, **_: Any) -> None:
    for agents in AGENTS:
        agents.stop()
    Path(CONFIG["outcomes"]).write_text(json.dumps(OUTCOMES))
    Path(CONFIG["outcomes"]).with_name("examples.json").write_text(json.dumps(EXAMPLES, indent=1))
    Path(CONFIG["admitted"]).write_text(json.dumps(ADMITTED))


@events.spawning_complete.add_listener
def _reset_admitted(**_: Any) -> None:
    """Start afresh when Locust resets its statistics (--reset-stats, once every user started), so the
    admitted figures count the same operations as Locust's end-to-end ones (and those that end after its
    last CSV write: it rewrites the CSV once a second, this file is written once, at quitting)."""
    ADMITTED.clear()


@events.request.add_listener
def _count_admitted(
    request_type: str, name: str, response_time: float, context: Any = None, response: Any = None, **_: Any
) -> None:
    """File one finished operation under its kind: admitted (with its seconds), refused, or unanswered."""
    kind = ADMITTED.setdefault(name, {"type": request_type, "admitted": [], "refused": 0, "unanswered": 0})
    if request_type == "SDK":  # SdkUser.operate put the agent's own account in the context
        kind["refused"] += int(context.get("refused", 0))
        if context.get("admitted_seconds") is not None:
            kind["admitted"].append(context["admitted_seconds"])
        elif context.get("unanswered"):
            kind["unanswered"] += 1
        return
    status = int(getattr(response, "status_code", 0) or 0)
    if refused(response):
        kind["refused"] += 1
    elif status == 0:
        kind["unanswered"] += 1
    else:
        kind["admitted"].append(response_time / 1000)


def classify_sdk(answer: dict[str, Any] | None) -> str | None:
    """None for a success, else the error's name for the report (and count the outcome)."""
    if answer is None:
        OUTCOMES["sdk hang"] += 1
        return "no answer in time (hang)"
    OUTCOMES["sdk busy retries"] += int(answer.get("busy", 0))
    if answer["ok"]:
        OUTCOMES["sdk ok"] += 1
        return None
    error = str(answer["error"])
    examples = EXAMPLES.setdefault(error, [])
    if len(examples) < MAX_EXAMPLES:
        examples.append(str(answer.get("message", "")))
    OUTCOMES["sdk Busy (documented)" if error.endswith(" Busy") else f"sdk {error}"] += 1
    return error


class SdkUser(User):
    """A user whose operations run in an SDK agent."""

    abstract = True
    wait_time = WAIT

    def on_start(self) -> None:
        self.index, self.token = next_token()
        self.workspace = Path(CONFIG["work"]) / f"u{self.index}"

    def operate(self, name: str, request: dict[str, Any]) -> dict[str, Any] | None:
        started = time.perf_counter()
        answer = AGENTS[0].call({"token": self.token, **request})
        seconds = answer["seconds"] if answer else time.perf_counter() - started
        error = classify_sdk(answer)
        account = {"unanswered": True}
        if answer:
            account = {"refused": answer.get("refused", 0), "admitted_seconds": answer.get("admitted_seconds")}
        self.environment.events.request.fire(
            request_type="SDK",
            name=name,
            response_time=seconds * 1000,
            response_length=int(answer.get("objects", 0)) if answer else 0,
            exception=RuntimeError(error) if error else None,
            context=account,
        )
        return answer if answer and answer["ok"] else None


class UpToDatePuller(SdkUser):
    """Pulls the seed dataset once (not counted), then again and again: nothing to move."""

    weight = int(CONFIG["weights"]["uptodate"])

    def on_start(self) -> None:
        super().on_start()
        self.ready = AGENTS[0].call({"op": "pull", "url": CONFIG["seed_url"], "token": self.token, **self._ws()})

    def _ws(self) -> dict[str, str]:
        return {"workspace": str(self.workspace)}

    @task
    def pull(self) -> None:
        self.operate("pull up-to-date", {"op": "pull", "url": CONFIG["seed_url"], **self._ws()})


class FreshPuller(SdkUser):
    """Pulls the 10-object seed dataset into a new workspace each time."""

    weight = int(CONFIG["weights"]["pull10"])

    @task
    def pull(self) -> None:
        fresh = f"{self.workspace}-{time.time_ns()}"
        self.operate("pull 10 objects", {"op": "pull_fresh", "url": CONFIG["seed_url"], "workspace": fresh})


class Pusher(SdkUser):
    """Pushes a new block of 1-3 small objects to its own dataset."""

    weight = int(CONFIG["weights"]["push"])

    @task
    def push(self) -> None:
        dataset = f"{CONFIG['push_prefix']}-u{self.index}"
        request = {"op": "push", "dataset": dataset, "files": random.randint(1, 3), "workspace": str(self.workspace)}
        answer = self.operate("push 1-3 objects", {"url": f"{CONFIG['url']}/{dataset}", **request})
        record = {"dataset": dataset, "workspace": str(self.workspace), "ok": answer is not None}
        record["head"] = answer["remote_head"] if answer else None  # the head the server acknowledged
        with Path(CONFIG["pushes"]).open("a") as pushes:
            pushes.write(json.dumps(record) + "\n")


def refused(response: Any) -> bool:
    """The documented refusal: 429 (a request limit) or 503 (the connection limit, --max-connections),
    either with Retry-After."""
    status = int(getattr(response, "status_code", 0) or 0)
    return status in (429, 503) and bool(response.headers and response.headers.get("Retry-After"))


def checked(response: Any, expected: int = 200) -> None:
    """Mark a REST answer: success, the documented refusal (429 + Retry-After), or another failure."""
    status = int(response.status_code or 0)
    if status == expected:
        OUTCOMES["rest ok"] += 1
        response.success()
    elif refused(response):
        OUTCOMES[f"rest {status} with Retry-After"] += 1
        response.failure(f"{status} Busy, Retry-After {response.headers.get('Retry-After')}")
    else:
        OUTCOMES["rest reset or refused" if status == 0 else f"rest {status}"] += 1
        response.failure(f"status {status}" if status else f"connection: {response.error}")


class TokenHttpUser(FastHttpUser):
    """A REST user with its own bearer token; every wait is bounded. Refused with 429/503 + Retry-After,
    it waits as told before its next request, doubling with each refusal in a row (as the SDK's Busy retry
    does, and as HTTP asks of a client told Retry-After); a user that came straight back would measure the
    cost of ignoring the server, not the server."""

    abstract = True
    network_timeout = 30.0
    connection_timeout = 10.0

    def on_start(self) -> None:
        self.index, token = next_token()
        self.auth = {"Authorization": f"Bearer {token}"}
        self.refusals_in_a_row = 0
        self.retry_after = 0.0

    def wait_time(self) -> float:
        """Think time, or the server's Retry-After (doubled per refusal in a row, with jitter) when refused."""
        if not self.refusals_in_a_row:
            return float(WAIT(self))
        return backoff_delay(self.refusals_in_a_row, self.retry_after, MAX_BUSY_DELAY)

    def check(self, response: Any) -> None:
        checked(response)
        if refused(response):
            self.refusals_in_a_row += 1
            self.retry_after = float(response.headers.get("Retry-After") or 1)
        else:
            self.refusals_in_a_row = 0

    def get(self, path: str, name: str) -> None:
        with self.client.get(path, headers=self.auth, name=name, catch_response=True) as response:
            self.check(response)


class RestReader(TokenHttpUser):
    """The simple protocol's reads."""

    weight = int(CONFIG["weights"]["rest"])

    @task
    def list_datasets(self) -> None:
        self.get("/", "REST list datasets")

    @task
    def block(self) -> None:
        self.get(f"/{CONFIG['seed']}/blocks/{CONFIG['block']}", "REST block")

    @task
    def read_object(self) -> None:
        self.get(f"/{CONFIG['seed']}/data/{CONFIG['object']}?redirect=false", "REST object")


class SharingReader(TokenHttpUser):
    """Delta Sharing: the listings and a table query."""

    weight = int(CONFIG["weights"]["sharing"])

    @task
    def shares(self) -> None:
        self.get("/delta-sharing/shares", "DS list shares")

    @task
    def tables(self) -> None:
        self.get("/delta-sharing/shares/smart-transfer/all-tables", "DS list tables")

    @task
    def query(self) -> None:
        path = f"/delta-sharing/shares/smart-transfer/schemas/datasets/tables/{CONFIG['table']}/query"
        headers = {**self.auth, "Content-Type": "application/json"}
        with self.client.post(path, json={}, headers=headers, name="DS table query", catch_response=True) as r:
            self.check(r)
