"""Access control, limits and hostile input against real server processes: every attempt to get in
where one does not belong, to exhaust the server, or to escape a dataset's prefix fails cleanly."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from smart_transfer.protocol import SUBPROTOCOL
from tests.conftest import CLI, ServerProcess, free_port, make_files, run_cli


def ws(server: ServerProcess, path: str, token: str | None = None) -> ClientConnection:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return connect(
        server.url.replace("http://", "ws://") + path,
        subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
        additional_headers=headers,
        open_timeout=10,
    )


def error_of(connection: ClientConnection) -> dict[str, Any]:
    message = orjson.loads(connection.recv(timeout=10))
    assert message["type"] == "Error", message
    return message  # type: ignore[no-any-return]


def token(tokens: Path, subject: str, *grants: str) -> str:
    result = subprocess.run(
        [*CLI, "token", "add", "--tokens", str(tokens), "--subject", subject, *grants],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


@pytest.fixture
def guarded(server_factory: Any, tmp_path: Path) -> Iterator[tuple[ServerProcess, dict[str, str]]]:
    tokens = tmp_path / "tokens.json"
    secrets = {
        "reader": token(tokens, "reader", "--read", "*"),
        "writer": token(tokens, "writer", "--write", "team-*"),
        "outsider": token(tokens, "outsider", "--read", "elsewhere"),
    }
    assert "sha256" in tokens.read_text() and not any(s in tokens.read_text() for s in secrets.values())
    assert oct(tokens.stat().st_mode & 0o777) == "0o600"
    yield server_factory("--tokens", str(tokens)), secrets


def test_tokens_grant_exactly_what_they_say(guarded: tuple[ServerProcess, dict[str, str]], tmp_path: Path) -> None:
    server, secret = guarded
    ws_a = tmp_path / "a"
    run_cli("add", "team-a", *map(str, make_files(tmp_path / "in", 2, 100)), workspace=ws_a)
    no_token = run_cli("push", "team-a", f"{server.url}/team-a", workspace=ws_a)
    assert no_token.returncode == 3 and "Unauthorized" in no_token.stderr
    reader_push = run_cli("push", "team-a", f"{server.url}/team-a", "--token", secret["reader"], workspace=ws_a)
    assert reader_push.returncode == 3 and "Forbidden" in reader_push.stderr
    pushed = run_cli("push", "team-a", f"{server.url}/team-a", "--token", secret["writer"], workspace=ws_a)
    assert pushed.returncode == 0, pushed.stderr
    pulled = run_cli("pull", f"{server.url}/team-a", "--token", secret["reader"], workspace=tmp_path / "b")
    assert pulled.returncode == 0, pulled.stderr
    outsider = run_cli("pull", f"{server.url}/team-a", "--token", secret["outsider"], workspace=tmp_path / "c")
    assert outsider.returncode == 3 and "Forbidden" in outsider.stderr

    head = f"{server.url}/team-a/refs/head"
    unauthorized = httpx.get(head)
    assert unauthorized.status_code == 401 and unauthorized.headers["www-authenticate"].startswith("Bearer")
    assert httpx.get(head, headers={"Authorization": "Bearer nope"}).status_code == 401
    assert httpx.get(head, headers={"Authorization": f"Bearer {secret['reader']}"}).status_code == 200
    assert httpx.get(head, headers={"Authorization": f"Bearer {secret['outsider']}"}).status_code == 403
    body = b"x"
    put = f"{server.url}/team-a/data/f1220" + "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
    assert httpx.put(put, content=body, headers={"Authorization": f"Bearer {secret['reader']}"}).status_code == 403
    assert (
        httpx.put(put, content=body, headers={"Authorization": f"Bearer {secret['writer']}"}).status_code == 202
    )  # staged until a block references it
    other = f"{server.url}/other/data/f1220" + "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
    assert httpx.put(other, content=body, headers={"Authorization": f"Bearer {secret['writer']}"}).status_code == 403
    listing = httpx.get(server.url + "/", headers={"Authorization": f"Bearer {secret['outsider']}"}).json()
    assert listing["datasets"] == []
    assert httpx.get(server.url + "/").status_code == 401


def test_read_only_tokens_never_receive_an_upload_url(guarded: tuple[ServerProcess, dict[str, str]]) -> None:
    server, secret = guarded
    with ws(server, "/team-x/push", secret["reader"]) as connection:
        message = error_of(connection)  # before any negotiation can happen
        assert message["code"] == "Forbidden"
    with ws(server, "/team-x/push") as connection:
        assert error_of(connection)["code"] == "Unauthorized"


def test_anonymous_access_beyond_loopback_is_refused(tmp_path: Path) -> None:
    result = subprocess.run(
        [*CLI, "serve", "--host", "0.0.0.0", "--port", str(free_port()), "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 2
    assert "refusing to serve 0.0.0.0 without --tokens" in result.stderr
    assert "listening" not in result.stdout


def test_busy_sessions_are_told_when_to_retry_and_clients_back_off(server_factory: Any, tmp_path: Path) -> None:
    server: ServerProcess = server_factory("--max-sessions", "1")
    run_cli("add", "busy", *map(str, make_files(tmp_path / "in", 1, 10)), workspace=tmp_path / "a")
    assert run_cli("push", "busy", f"{server.url}/busy", workspace=tmp_path / "a").returncode == 0
    with ws(server, "/busy/pull") as holder:
        holder.send('{"type": "DatasetPullRequest"}')
        assert orjson.loads(holder.recv(timeout=10))["type"] == "DatasetPullResponse"
        with ws(server, "/busy/pull") as second:
            busy = error_of(second)
            assert busy["code"] == "Busy" and busy["details"]["retry_after"] == 2
        # the slot is released once the pull has been told it is busy (a timer would race the CLI's start)
        pull = subprocess.Popen(
            [*CLI, "pull", f"{server.url}/busy", "--workspace", str(tmp_path / "b")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        told = threading.Event()
        lines: list[str] = []

        def read_stderr() -> None:
            assert pull.stderr is not None
            for line in pull.stderr:
                lines.append(line)
                if "server busy; retrying" in line:
                    told.set()

        reader = threading.Thread(target=read_stderr)
        reader.start()
        try:
            assert told.wait(60), "".join(lines)
        finally:
            holder.close()
        pull.wait(120)
        reader.join(10)
    assert pull.returncode == 0, "".join(lines)


def _held_upload(server: ServerProcess, path: str) -> socket.socket:
    """A PUT whose body never finishes (headers and its first byte sent): once admitted it holds a
    request slot until the socket closes."""
    host, port = server.url.removeprefix("http://").split(":")
    upload = socket.create_connection((host, int(port)), timeout=30)
    upload.sendall(f"PUT {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 2\r\n\r\na".encode())
    return upload


def test_busy_rest_answers_429_with_retry_after(server_factory: Any) -> None:
    server: ServerProcess = server_factory("--max-requests", "1")
    path = "/slow/data/f1220" + "00" * 32
    # Either request may reach the one slot first: a GET answered while the upload holds it is Busy; an
    # upload refused because a GET held it is answered at once, so it is opened again.
    deadline = time.monotonic() + 30
    upload = _held_upload(server, path)
    try:
        busy = httpx.get(f"{server.url}/slow/refs/head", timeout=30)
        while busy.status_code != 429 and time.monotonic() < deadline:
            if select.select([upload], [], [], 0.05)[0]:  # answered (refused): the slot is not held
                upload.close()
                upload = _held_upload(server, path)
            busy = httpx.get(f"{server.url}/slow/refs/head", timeout=30)
    finally:
        upload.close()
    assert busy.status_code == 429
    assert busy.headers["retry-after"] == "2"
    assert busy.json()["error"]["code"] == "Busy"


def test_a_client_that_never_speaks_is_closed_in_time(server_factory: Any) -> None:
    server: ServerProcess = server_factory("--idle-timeout", "1")
    started = time.monotonic()
    with ws(server, "/quiet/pull") as connection:
        assert error_of(connection)["code"] == "Timeout"
    assert time.monotonic() - started < 10  # closed by the server, not by this test's own timeout


def test_sessions_end_at_the_session_timeout_however_chatty(server_factory: Any, tmp_path: Path) -> None:
    server: ServerProcess = server_factory("--session-timeout", "2")
    run_cli("add", "chatty", *map(str, make_files(tmp_path / "in", 1, 10)), workspace=tmp_path / "a")
    run_cli("push", "chatty", f"{server.url}/chatty", workspace=tmp_path / "a")
    with ws(server, "/chatty/pull") as connection:
        connection.send('{"type": "DatasetPullRequest"}')
        connection.recv(timeout=10)
        connection.send('{"type": "DatasetPullMetadataRequest"}')
        connection.recv(timeout=10)
        deadline = time.monotonic() + 10
        code = None
        while time.monotonic() < deadline and code is None:
            try:
                connection.send('{"type": "Progress", "objects_done": 0, "bytes_done": 0}')
                code = orjson.loads(connection.recv(timeout=0.3))["code"]
            except TimeoutError:
                continue
            except Exception:
                break
        assert code == "Timeout"


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_a_flood_of_tiny_messages_costs_bounded_memory(server_factory: Any, tmp_path: Path) -> None:
    server: ServerProcess = server_factory()
    run_cli("add", "flood", *map(str, make_files(tmp_path / "in", 1, 10)), workspace=tmp_path / "a")
    run_cli("push", "flood", f"{server.url}/flood", workspace=tmp_path / "a")
    before = _rss_kib(server.process.pid)
    with ws(server, "/flood/pull") as connection:
        connection.send('{"type": "DatasetPullRequest"}')
        connection.recv(timeout=10)
        connection.send('{"type": "DatasetPullMetadataRequest"}')
        connection.recv(timeout=10)
        for _ in range(20_000):
            connection.send('{"type": "Progress", "objects_done": 1, "bytes_done": 1}')
        connection.send('{"type": "DatasetPullComplete"}')
        with pytest.raises(Exception):  # noqa: B017 - the server finishes and closes normally
            connection.recv(timeout=30)
        assert connection.close_code == 1000
    assert _rss_kib(server.process.pid) - before < 50 * 1024
    assert httpx.get(server.url + "/").status_code == 200


def test_oversized_frames_are_refused(server_factory: Any) -> None:
    server: ServerProcess = server_factory("--max-message-bytes", str(1024 * 1024))
    with ws(server, "/big/push") as connection:
        connection.send(
            orjson.dumps(
                {
                    "type": "DatasetPushRequest",
                    "transfer_plan": {"num_blocks": 0, "num_objects": 0, "bytes_in_objects": 0},
                }
            ).decode()
        )
        assert orjson.loads(connection.recv(timeout=10))["type"] == "DatasetPushRequestAccepted"
        with pytest.raises(Exception):  # noqa: B017 - closed: frame too big
            connection.send(os.urandom(2 * 1024 * 1024))
            connection.recv(timeout=10)
        assert connection.close_code == 1009
    assert httpx.get(server.url + "/").status_code == 200


ESCAPES = [
    "..",
    "%2e%2e",
    "%252e%252e",
    "..%2f..%2fcanary",
    "%2e%2e%2f%2e%2e%2fcanary",
    "..%5c..%5ccanary",
    "\u2024\u2024",
    "%c0%ae%c0%ae",
    "%00",
    "a%00b",
    "canary%00.txt",
    "%2fetc%2fpasswd",
    "..%00",
]


@pytest.mark.parametrize("name", ESCAPES)
def test_names_and_hashes_never_reach_outside_the_root(local_server: ServerProcess, name: str) -> None:
    canary = local_server.root.parent / "canary"
    canary.write_text("secret canary")
    before = sorted(p.name for p in local_server.root.parent.iterdir())
    digest = "f1220" + "00" * 32
    for path in (
        f"/{name}/refs/head",
        f"/{name}/data/{digest}",
        f"/{name}",
        f"/ok/data/{name}",
        f"/ok/blocks/{name}",
        f"/ok/{name}/{digest}",
        f"/ok/data/{digest}?redirect={name}",
        f"/_store/{name}?sp=GET&expires=9999999999&signature=x",
    ):
        for method in ("GET", "PUT"):
            response = httpx.request(method, local_server.url + path, content=b"x", timeout=10)
            if response.status_code == 200 and method == "GET":
                # the HTTP client itself resolved a literal '..' segment to '/': the server description
                assert response.json()["server"] == "smart-transfer", path
                continue
            assert response.status_code in (400, 403, 404, 405), (method, path, response.status_code)
            assert b"secret canary" not in response.content
    try:
        with ws(local_server, f"/{name}/pull") as connection:
            # a name with an encoded '/' is no dataset name: either refused as such or matched by no route
            assert error_of(connection)["code"] in ("InvalidDatasetName", "NoSuchRoute")
    except InvalidStatus as exc:  # no WebSocket route matches such a path at all
        assert exc.response.status_code in (403, 404)
    assert canary.read_text() == "secret canary"
    assert sorted(p.name for p in local_server.root.parent.iterdir()) == before


def _masked_text_frame(text: str) -> bytes:
    payload = text.encode()
    mask = os.urandom(4)
    header = (
        bytes([0x81, 0x80 | len(payload)])
        if len(payload) < 126
        else bytes([0x81, 0xFE]) + len(payload).to_bytes(2, "big")
    )
    return header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def test_a_client_that_stops_reading_is_closed_with_bounded_memory(server_factory: Any, tmp_path: Path) -> None:
    import socket

    # the dataset is pushed to a server without the short session timeout (a push of 300 objects may take
    # longer than 3 s on a loaded machine), which then restarts on the same store with it
    setup: ServerProcess = server_factory(root=tmp_path / "server")
    run_cli("add", "reader", *map(str, make_files(tmp_path / "in", 300, 10)), workspace=tmp_path / "a")
    pushed = run_cli("push", "reader", f"{setup.url}/reader", workspace=tmp_path / "a")
    assert pushed.returncode == 0, pushed.stderr
    setup.stop()
    server: ServerProcess = server_factory("--session-timeout", "3", root=tmp_path / "server")
    before = _rss_kib(server.process.pid)
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as raw:
        raw.sendall(
            f"GET /reader/pull HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            f"Sec-WebSocket-Protocol: {SUBPROTOCOL}\r\n\r\n".encode()
        )
        time.sleep(0.5)
        # ask for everything, then never read: the server's answers pile up on its side of the socket
        raw.sendall(_masked_text_frame('{"type": "DatasetPullRequest"}'))
        raw.sendall(_masked_text_frame('{"type": "DatasetPullMetadataRequest"}'))
        time.sleep(5)  # beyond the 3 s session timeout
        received = b""
        started = time.monotonic()
        while time.monotonic() - started < 20:
            chunk = raw.recv(65536)
            if not chunk:
                break  # the server closed the connection
            received += chunk
        assert b"Timeout" in received  # the typed error was sent before the close
    assert _rss_kib(server.process.pid) - before < 50 * 1024
    assert httpx.get(server.url + "/").status_code == 200
