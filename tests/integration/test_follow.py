"""`pull --follow`: a subscriber stays in sync as pushes land, in one session, through replicas, across
dropped connections and session timeouts, and ends cleanly on Ctrl-C. Real server processes, real CLI
processes, and one raw WebSocket session checked frame by frame against the transition table."""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Subprotocol

from smart_transfer.protocol import SUBPROTOCOL
from smart_transfer.protocol import messages as m
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.connection import CLOSE_NORMAL, Connection, PeerError
from smart_transfer.protocol.flows import Phase, Sender
from tests.conftest import (
    CLI,
    S3Env,
    ServerProcess,
    backend_args,
    make_files,
    run_cli,
    start_replicas,
    start_server,
    summary,
)
from tests.integration.test_operations import metrics_of, sample
from tests.integration.test_smart_transfer import log_of

#: Seconds a pushed head may take to reach a follower before the test fails: the replicas poll at
#: most every second; the rest is a CLI pull on a shared 2-core machine.
DELIVERY_BOUND = 30.0


class Follower:
    """A `pull --follow --json` process; its lines, with the time each arrived."""

    def __init__(self, url: str, workspace: Path, *extra: str) -> None:
        self.process = subprocess.Popen(
            [*CLI, "pull", url, "--follow", "--json", "--workspace", str(workspace), *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.updates: list[tuple[float, dict[str, object]]] = []
        self.errors: list[str] = []
        self._readers = [
            threading.Thread(target=self._read_updates, daemon=True),
            threading.Thread(target=self._read_errors, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_updates(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.updates.append((time.monotonic(), orjson.loads(line)))

    def _read_errors(self) -> None:
        assert self.process.stderr is not None
        self.errors.extend(self.process.stderr)

    def wait_for_head(self, head: str, timeout: float = DELIVERY_BOUND) -> float:
        """When the follower printed an update ending at ``head``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for at, update in list(self.updates):
                if update["new_head"] == head:
                    return at
            assert self.process.poll() is None, "".join(self.errors)
            time.sleep(0.02)
        pytest.fail(f"no update to {head} within {timeout} s; stderr: {''.join(self.errors)}")

    def interrupt(self) -> int:
        """Ctrl-C: the exit code (the session ends cleanly first)."""
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(30)
        for reader in self._readers:
            reader.join(10)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def followers() -> Iterator[list[Follower]]:
    started: list[Follower] = []
    yield started
    for follower in started:
        follower.kill()


def push_one(workspace: Path, name: str, url: str, tag: str) -> str:
    """Add one small file to ``name`` and push it to ``url``; the new head."""
    assert (
        run_cli(
            "add", name, *map(str, make_files(workspace.parent / tag, 1, 3000, tag)), workspace=workspace
        ).returncode
        == 0
    )
    return str(summary(run_cli("push", name, url, "--json", workspace=workspace))["new_head"])


def test_a_follower_sees_every_push_through_either_replica_and_ends_cleanly(
    s3_env: S3Env, tmp_path: Path, dataset_name: str, followers: list[Follower]
) -> None:
    replicas = start_replicas(
        tmp_path, 2, *backend_args("s3", s3_env), "--follow-poll-max", "1", "--keepalive-interval", "1"
    )
    try:
        urls = [f"{replica.url}/{dataset_name}" for replica in replicas]
        writer, reader = tmp_path / "writer", tmp_path / "reader"
        first = push_one(writer, dataset_name, urls[0], "first")
        follower = Follower(urls[0], reader)
        followers.append(follower)
        follower.wait_for_head(first)
        delays = []
        for number in range(5):
            through = number % 2  # pushes 2 and 4 go through the other replica
            pushed_at = time.monotonic()
            head = push_one(writer, dataset_name, urls[through], f"p{number}")
            done = time.monotonic()
            printed = follower.wait_for_head(head)
            delays.append((round(printed - pushed_at, 2), round(printed - done, 2)))
            assert follower.updates[-1][1]["blocks"] == 1 and follower.updates[-1][1]["objects_transferred"] == 1
            assert done - pushed_at < DELIVERY_BOUND
        assert follower.interrupt() == 0, "".join(follower.errors)
        assert follower.updates[0][1]["new_head"] == first
        assert len(follower.updates) == 6  # the first pull and one line per push, nothing twice
        assert log_of(reader, dataset_name) == log_of(writer, dataset_name)
        metrics = metrics_of(replicas[0])
        assert sample(metrics, "smart_transfer_follow_updates_total") == 5
        assert sample(metrics, "smart_transfer_sessions_total", flow="pull", outcome="ok") == 1
        # (from the push command's start, from its exit): negative when the follower was done first
        print(f"follow: update printed after each push (s): {delays}")
        assert all(since_start < DELIVERY_BOUND for since_start, _ in delays)
    finally:
        for replica in replicas:
            replica.stop()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_follower_whose_server_dies_resumes_with_a_pull(
    tmp_path: Path, dataset_name: str, followers: list[Follower]
) -> None:
    port = str(_free_port())
    server = start_server(tmp_path / "server", "--port", port)
    try:
        url = f"{server.url}/{dataset_name}"
        writer = tmp_path / "writer"
        first = push_one(writer, dataset_name, url, "first")
        follower = Follower(url, tmp_path / "reader")
        followers.append(follower)
        follower.wait_for_head(first)
        server.process.kill()  # the connection drops without a word
        server.process.wait(10)
        server = start_server(tmp_path / "server", "--port", port)
        head = push_one(writer, dataset_name, url, "after")
        follower.wait_for_head(head, timeout=60)  # resumed by a normal pull, which caught up
        assert any("resuming with a pull" in line for line in follower.errors), follower.errors
        assert follower.interrupt() == 0
        assert log_of(tmp_path / "reader", dataset_name) == log_of(writer, dataset_name)
    finally:
        server.stop()


def test_the_session_timeout_still_ends_a_following_session(
    tmp_path: Path, dataset_name: str, followers: list[Follower]
) -> None:
    server = start_server(tmp_path / "server", "--session-timeout", "3", "--keepalive-interval", "0.5")
    try:
        url = f"{server.url}/{dataset_name}"
        writer = tmp_path / "writer"
        push_one(writer, dataset_name, url, "first")
        follower = Follower(url, tmp_path / "reader")
        followers.append(follower)
        deadline = time.monotonic() + 30
        while not any("Timeout" in line for line in follower.errors):
            assert time.monotonic() < deadline, follower.errors
            time.sleep(0.05)
        head = push_one(writer, dataset_name, url, "later")
        follower.wait_for_head(head)
        assert follower.interrupt() == 0
        assert sample(metrics_of(server), "smart_transfer_sessions_total", flow="pull", outcome="Timeout") >= 1
    finally:
        server.stop()


class RawSession:
    """A pull session spoken frame by frame, each checked by the project's Connection (client role)."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.model = Connection("pull", Sender.CLIENT)

    def send(self, message: m.Message) -> None:
        self.ws.send(self.model.send(message))

    def receive(self, *types: type[m.Message] | type[m.MetadataTarball], absorb: bool = True) -> object:
        """The next message of ``types``; the server's keep-alives are absorbed unless asked for."""
        self.model.expect(*types)
        while True:
            received = self.model.receive(self.ws.recv(timeout=30))
            if received is not None:
                return received
            if not absorb:
                return self.model.peer_progress


def test_a_raw_following_session_takes_the_follow_transitions(tmp_path: Path, dataset_name: str) -> None:
    server: ServerProcess = start_server(tmp_path / "server", "--keepalive-interval", "0.5")
    try:
        url = f"{server.url}/{dataset_name}"
        writer = tmp_path / "writer"
        first = push_one(writer, dataset_name, url, "first")
        address = f"{server.url.replace('http://', 'ws://')}/{dataset_name}/pull"
        with connect(address, subprotocols=[Subprotocol(SUBPROTOCOL)], open_timeout=30) as ws:
            session = RawSession(ws)
            session.send(m.DatasetPullRequest())
            plan = session.receive(m.DatasetPullResponse)
            assert isinstance(plan, m.DatasetPullResponse) and plan.head == first
            session.send(m.DatasetPullMetadataRequest())
            session.receive(m.MetadataTarball)
            session.send(m.DatasetPullFollow())  # Transfer -> Following
            assert session.model.phase is Phase.FOLLOWING
            keep_alive = session.receive(m.DatasetPullHeadMoved, absorb=False)  # nothing moved: its keep-alive
            assert isinstance(keep_alive, m.Progress)
            session.send(m.Progress(objects_done=0, bytes_done=0))

            second = push_one(writer, dataset_name, url, "second")
            moved = session.receive(m.DatasetPullHeadMoved)
            assert isinstance(moved, m.DatasetPullHeadMoved) and moved.head == second
            assert session.model.phase is Phase.HEAD_MOVED
            session.send(m.Progress(objects_done=0, bytes_done=0))  # crossing keep-alives are allowed
            session.send(m.DatasetPullRequest(begin_after=first))
            increment = session.receive(m.DatasetPullResponse)
            assert isinstance(increment, m.DatasetPullResponse)
            assert (increment.head, increment.transfer_plan.num_blocks) == (second, 1)
            session.send(m.DatasetPullFollow())  # AwaitMetadataRequest -> Following

            third = push_one(writer, dataset_name, url, "third")
            moved = session.receive(m.DatasetPullHeadMoved)
            assert isinstance(moved, m.DatasetPullHeadMoved) and moved.head == third
            session.send(m.DatasetPullComplete())  # HeadMoved -> Done
            assert session.model.phase is Phase.DONE
            with pytest.raises(ConnectionClosed):  # the server closes the finished session
                ws.recv(timeout=30)
            assert ws.close_code == CLOSE_NORMAL
        assert sample(metrics_of(server), "smart_transfer_sessions_total", flow="pull", outcome="ok") == 1
    finally:
        server.stop()


def test_a_silent_follower_meets_the_idle_timeout(tmp_path: Path, dataset_name: str) -> None:
    """The server's keep-alives do not keep a session alive: the client's must come within the idle timeout."""
    server = start_server(tmp_path / "server", "--idle-timeout", "2", "--keepalive-interval", "0.5")
    try:
        push_one(tmp_path / "writer", dataset_name, f"{server.url}/{dataset_name}", "first")
        address = f"{server.url.replace('http://', 'ws://')}/{dataset_name}/pull"
        with connect(address, subprotocols=[Subprotocol(SUBPROTOCOL)], open_timeout=30) as ws:
            session = RawSession(ws)
            session.send(m.DatasetPullRequest())
            session.receive(m.DatasetPullResponse)
            session.send(m.DatasetPullFollow())
            started = time.monotonic()
            with pytest.raises(PeerError) as ended:
                session.receive(m.DatasetPullHeadMoved)  # its keep-alives, then the timeout
            assert ended.value.code is ErrorCode.TIMEOUT
            assert 1.5 < time.monotonic() - started < 30
    finally:
        server.stop()


def test_following_needs_the_smart_protocol(local_server: ServerProcess, tmp_path: Path) -> None:
    result = run_cli("pull", f"{local_server.url}/any", "--follow", "--protocol", "simple", workspace=tmp_path / "w")
    assert result.returncode == 2 and "smart protocol" in result.stderr and "Traceback" not in result.stderr


def test_the_simple_transport_refuses_to_follow_with_a_typed_error_the_cli_reports_in_one_line() -> None:
    import asyncio

    from smart_transfer.cli.main import exit_code
    from smart_transfer.client.errors import FollowUnsupported
    from smart_transfer.client.transports.simple import SimplePull

    channel = SimplePull(rest=None)  # type: ignore[arg-type]  # following never reaches the server
    with pytest.raises(FollowUnsupported) as refused:
        asyncio.run(channel.follow(asyncio.Event(), 1.0))
    assert refused.value.code is ErrorCode.INVALID_REQUEST
    code, line = exit_code(refused.value)
    assert code == 2 and "smart protocol" in line and "\n" not in line
