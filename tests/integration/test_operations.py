"""Running the server in production, against real server processes: health and readiness, Prometheus
metrics, the access log, configuration from the environment, connection-level bounds (slow headers,
too many connections), the decompression-bomb check, per-address anonymous limits, the error log
under a flood of bad frames, exit codes, and the drain on SIGTERM."""

from __future__ import annotations

import gzip
import io
import os
import re
import signal
import socket
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame, Opcode
from websockets.sync.client import ClientConnection, connect

from smart_transfer.cli.main import build_parser
from smart_transfer.model import Multihash
from smart_transfer.model.pack import encode_pack
from smart_transfer.protocol import SUBPROTOCOL
from smart_transfer.storage.s3 import S3Store
from tests.conftest import CLI, S3Env, ServerProcess, backend_args, free_port, make_files, run_cli, summary
from tests.integration.test_resume_and_expiry import log_of, remote_chain
from tests.integration.test_security import error_of, token, ws

PUSH_REQUEST = (
    '{"type": "DatasetPushRequest", "current_head": null, "known_blocks": [], '
    '"transfer_plan": {"num_blocks": 1, "num_objects": 0, "bytes_in_objects": 0}}'
)


def metrics_of(server: ServerProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The server's /metrics, parsed by the Prometheus client's own parser: sample -> value."""
    answer = httpx.get(f"{server.url}/metrics", timeout=10)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def sample(values: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return values.get((name, tuple(sorted(labels.items()))), 0.0)


def wait_until(condition: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def lines_of(server: ServerProcess, fragment: str) -> list[str]:
    return [line for line in list(server.output) if fragment in line]


def test_health_readiness_and_metrics_follow_the_sessions(
    server_factory: Any, s3_env: S3Env, tmp_path: Path, dataset_name: str
) -> None:
    server: ServerProcess = server_factory(*backend_args("s3", s3_env), "--max-sessions", "1")
    assert httpx.get(f"{server.url}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{server.url}/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] is True, ready.text
    before = metrics_of(server)
    a, b = tmp_path / "a", tmp_path / "b"
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "in", 3, 1000)), workspace=a)
    summary(run_cli("push", dataset_name, f"{server.url}/{dataset_name}", "--json", workspace=a))
    summary(run_cli("pull", f"{server.url}/{dataset_name}", "--json", workspace=b))
    with ws(server, f"/{dataset_name}/push") as holder:  # holds the only session slot
        wait_until(lambda: sample(metrics_of(server), "smart_transfer_sessions_active", flow="push") == 1)
        with ws(server, f"/{dataset_name}/pull") as second:
            assert error_of(second)["code"] == "Busy"
        holder.close()
    after = metrics_of(server)
    assert sample(after, "smart_transfer_sessions_total", flow="push", outcome="ok") == 1
    assert sample(after, "smart_transfer_sessions_total", flow="pull", outcome="ok") == 1
    assert sample(after, "smart_transfer_sessions_total", flow="pull", outcome="Busy") == 1
    assert sample(after, "smart_transfer_busy_answers_total", limit="sessions") == 1
    assert sample(after, "smart_transfer_urls_signed_total", method="PUT") == 3
    assert sample(after, "smart_transfer_urls_signed_total", method="GET") == 3
    assert sample(after, "smart_transfer_object_bytes_through_server_total") == 0  # the smart path on S3
    store_calls = sum(v for (name, _), v in after.items() if name == "smart_transfer_store_seconds_count")
    assert store_calls > sum(v for (name, _), v in before.items() if name == "smart_transfer_store_seconds_count")
    assert sample(after, "smart_transfer_sessions_active", flow="push") == 0


def test_one_access_line_per_session_and_request_in_json(server_factory: Any, tmp_path: Path) -> None:
    server: ServerProcess = server_factory("--log-format", "json")
    run_cli("add", "logged", *map(str, make_files(tmp_path / "in", 2, 100)), workspace=tmp_path / "a")
    summary(run_cli("push", "logged", f"{server.url}/logged", "--json", workspace=tmp_path / "a"))
    assert httpx.get(f"{server.url}/logged/refs/head").status_code == 200
    assert httpx.get(f"{server.url}/nothing/refs/head").status_code == 404
    wait_until(lambda: len(lines_of(server, '"logger":"smart_transfer.access"')) >= 5)
    records = [orjson.loads(line) for line in lines_of(server, '"logger":"smart_transfer.access"')]
    sessions = [r for r in records if r["kind"] == "session"]
    assert [(s["flow"], s["dataset"], s["outcome"], s["client"]) for s in sessions] == [
        ("push", "logged", "ok", "127.0.0.1")
    ]
    assert sessions[0]["seconds"] >= 0 and sessions[0]["subject"] == "anonymous@127.0.0.1"
    requests = {(r["method"], r["path"], r["status"]) for r in records if r["kind"] == "request"}
    assert ("GET", "/logged/refs/head", 200) in requests and ("GET", "/nothing/refs/head", 404) in requests
    assert sum(1 for r in records if r["kind"] == "request" and r["path"].startswith("/_store/")) == 2  # uploads


def test_every_serve_flag_is_also_read_from_the_environment(server_factory: Any) -> None:
    shown = subprocess.run([*CLI, "serve", "--help"], capture_output=True, text=True, check=True).stdout
    help_text = "".join(shown.split())
    serve = build_parser()._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    options = [action for action in serve._actions if action.option_strings and action.dest != "help"]
    assert len(options) > 25
    for action in options:
        name = action.option_strings[0].lstrip("-").replace("-", "_").upper()
        assert f"[$SMART_TRANSFER_{name}]" in help_text, action.option_strings
    server: ServerProcess = server_factory(env={"SMART_TRANSFER_IDLE_TIMEOUT": "1"})
    started = time.monotonic()
    with ws(server, "/quiet/pull") as connection:
        assert error_of(connection)["code"] == "Timeout"
    assert time.monotonic() - started < 10
    bad = subprocess.run(
        [*CLI, "serve", "--port", str(free_port())],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "SMART_TRANSFER_MAX_SESSIONS": "many"},
        timeout=60,
    )
    assert bad.returncode == 2 and "--max-sessions" in bad.stderr and "Traceback" not in bad.stderr


def _open(server: ServerProcess, source: str = "127.0.0.1") -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))


def _answer_and_close(sock: socket.socket) -> bytes:
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def test_a_client_slow_with_its_headers_is_cut_off_and_connections_are_counted(server_factory: Any) -> None:
    hurried: ServerProcess = server_factory("--header-timeout", "1")
    started = time.monotonic()
    with _open(hurried) as slow:
        slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # never finishes its headers
        answer = _answer_and_close(slow)
    assert answer.startswith(b"HTTP/1.1 408") and b'"code":"Timeout"' in answer
    assert 0.9 < time.monotonic() - started < 5
    assert sample(metrics_of(hurried), "smart_transfer_connections_closed_total", reason="header-timeout") == 1
    crowded: ServerProcess = server_factory("--max-connections", "3")
    idle = [_open(crowded) for _ in range(3)]  # three connections that say nothing (yet)
    try:
        with _open(crowded) as fourth:
            refused = _answer_and_close(fourth)
        assert refused.startswith(b"HTTP/1.1 503") and b'"code":"Busy"' in refused and b"retry-after: 2" in refused
    finally:
        for sock in idle:
            sock.close()
    wait_until(lambda: httpx.get(f"{crowded.url}/healthz").status_code == 200)
    assert sample(metrics_of(crowded), "smart_transfer_connections_closed_total", reason="too-many") == 1


@pytest.fixture(scope="module")
def tar_bomb() -> bytes:
    """A ~300 KB gzip tarball whose one entry declares 300 MB (of zeros)."""
    size = 300 * 1024 * 1024
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=9) as gz:
        info = tarfile.TarInfo("pack-f1220" + "00" * 32)
        info.size = size
        gz.write(info.tobuf(format=tarfile.USTAR_FORMAT))
        zeros = bytes(4 * 1024 * 1024)
        for _ in range(size // len(zeros)):
            gz.write(zeros)
    return buffer.getvalue()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_tar_bomb_is_refused_by_its_header_before_inflating(server_factory: Any, tar_bomb: bytes) -> None:
    server: ServerProcess = server_factory()
    assert len(tar_bomb) < 400_000
    spent = []
    for _ in range(4):
        with ws(server, "/bombed/push") as connection:
            connection.send(PUSH_REQUEST)
            assert orjson.loads(connection.recv(timeout=10))["type"] == "DatasetPushRequestAccepted"
            before = _cpu_seconds(server.process.pid)
            connection.send(tar_bomb)
            error = error_of(connection)
            spent.append(_cpu_seconds(server.process.pid) - before)
        assert error["code"] == "InvalidBlocks" and "is not a regular file of at most" in error["message"]
    print(f"server CPU per tar bomb: {spent}")
    assert max(spent) < 0.05, spent  # the 3.5 s it cost to inflate it is gone
    # many small entries beyond what the request declared are refused as soon as they exceed it
    blocks = io.BytesIO()
    with tarfile.open(fileobj=blocks, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        pack = encode_pack([])
        entries = [f"pack-{Multihash.of(pack)}"], [pack]
        for index in range(64):
            content = bytes([index]) * 60_000  # each entry matches its name: only the size is wrong
            entries[0].append(f"manifest-{Multihash.of(content)}")
            entries[1].append(content)
        for name, content in zip(*entries, strict=True):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    with ws(server, "/bombed/push") as connection:
        connection.send(PUSH_REQUEST)
        connection.recv(timeout=10)
        connection.send(gzip.compress(blocks.getvalue()))
        error = error_of(connection)
    assert error["code"] == "InvalidBlocks" and "expands beyond" in error["message"]


def _ws_from(server: ServerProcess, path: str, source: str) -> ClientConnection:
    return connect(
        server.url.replace("http://", "ws://") + path,
        sock=_open(server, source),
        subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
        open_timeout=10,
    )


def test_anonymous_clients_are_limited_per_address(server_factory: Any) -> None:
    server: ServerProcess = server_factory("--max-sessions-per-token", "1", "--max-requests-per-token", "1")
    with _ws_from(server, "/held/push", "127.0.0.1") as held:
        wait_until(lambda: sample(metrics_of(server), "smart_transfer_sessions_active", flow="push") == 1)
        with _ws_from(server, "/held/push", "127.0.0.1") as same:
            busy = error_of(same)
            assert busy["code"] == "Busy" and "anonymous@127.0.0.1" in busy["message"]
        with _ws_from(server, "/held/push", "127.0.0.2") as other:
            with pytest.raises(TimeoutError):
                other.recv(timeout=1.0)  # not refused: waiting for its push request
            assert sample(metrics_of(server), "smart_transfer_sessions_active", flow="push") == 2
        held.close()


def _bad_utf8(server: ServerProcess) -> None:
    with ws(server, "/bad/pull") as connection:
        with connection.protocol_mutex:
            connection.protocol.send_frame(Frame(Opcode.TEXT, b"\xff\xfe{"))
            connection.send_data()
        with pytest.raises(ConnectionClosed):
            connection.recv(timeout=10)


def test_each_refused_frame_logs_one_line_and_floods_are_rate_limited(server_factory: Any) -> None:
    server: ServerProcess = server_factory("--error-log-rate", "1")  # bursts of 10 lines
    for _ in range(3):
        _bad_utf8(server)
    for _ in range(3):
        with ws(server, "/bad/pull") as connection:
            connection.send("not json")
            assert error_of(connection)["code"] == "BadMessage"
    wait_until(lambda: len(lines_of(server, "session flow=pull dataset=bad")) == 6)
    assert len(lines_of(server, "Invalid UTF-8")) == 3  # one warning line per frame uvicorn refused
    assert len(lines_of(server, "outcome=BadMessage")) == 3  # ours: the session's access line says why
    assert len(lines_of(server, "outcome=disconnected:1007")) == 3
    for _ in range(30):
        _bad_utf8(server)
    time.sleep(1.5)  # the bucket refills: the next line may pass, and says what was dropped
    _bad_utf8(server)
    wait_until(lambda: len(lines_of(server, "session flow=pull dataset=bad")) == 37)
    logged = lines_of(server, "Invalid UTF-8")
    dropped = sum(
        int(n) for n in re.findall(r"\((\d+) earlier line\(s\) dropped by the log rate limit", "".join(logged))
    )
    assert dropped > 0 and len(logged) + dropped == 34  # every refused frame: one line, or counted
    assert "dropped by the log rate limit" in logged[-1]
    assert not lines_of(server, "Traceback")


def test_exit_codes(server_factory: Any, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    reader = token(tokens, "reader", "--read", "*")
    writer = token(tokens, "writer", "--write", "*")
    server: ServerProcess = server_factory("--tokens", str(tokens))
    a = tmp_path / "a"
    run_cli("add", "codes", *map(str, make_files(tmp_path / "in", 1, 100)), workspace=a)
    url = f"{server.url}/codes"
    assert run_cli("push", "codes", url, "--token", writer, workspace=a).returncode == 0
    for protocol in ("smart", "simple"):
        for token_args in ([], ["--token", "not-a-token"]):
            result = run_cli("pull", url, "--protocol", protocol, *token_args, workspace=tmp_path / f"n{protocol}")
            assert result.returncode == 3 and "Unauthorized" in result.stderr, result.stderr
        result = run_cli("push", "codes", url, "--protocol", protocol, "--token", reader, workspace=a)
        assert result.returncode == 3 and "Forbidden" in result.stderr, result.stderr
    assert run_cli("pull", "http://127.0.0.1:1/codes", workspace=tmp_path / "x").returncode == 1
    assert run_cli("pull", "http://127.0.0.1:1/../codes", workspace=tmp_path / "x").returncode == 2
    assert run_cli("pull", url, "--read-timeout", "0", workspace=tmp_path / "x").returncode == 2
    for result in [run_cli("pull", "http://127.0.0.1:1/codes", workspace=tmp_path / "x")]:
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_sigterm_drains_running_sessions_then_exits(
    server_factory: Any, s3_env: S3Env, tmp_path: Path, dataset_name: str
) -> None:
    server: ServerProcess = server_factory(*backend_args("s3", s3_env), "--shutdown-grace", "30")
    a = tmp_path / "a"
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "in", 40, 16_384)), workspace=a)
    slow = ["--limit-rate", "200K", "--parallel", "4", "--json", "--workspace", str(a)]
    push = subprocess.Popen(
        [*CLI, "push", dataset_name, f"{server.url}/{dataset_name}", *slow],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(lambda: sample(metrics_of(server), "smart_transfer_sessions_active", flow="push") == 1)
    time.sleep(0.5)
    server.process.send_signal(signal.SIGTERM)
    refused_at = time.monotonic()
    wait_until(lambda: _refuses(server), timeout=5)  # stops accepting at once
    assert time.monotonic() - refused_at < 5
    out, err = push.communicate(timeout=120)
    assert push.returncode == 0, err  # the running push finished during the grace period
    assert orjson.loads(out)["objects_transferred"] == 40
    assert server.process.wait(30) == 0
    assert any("shutting down" in line for line in server.output)


def _refuses(server: ServerProcess) -> bool:
    try:
        _open(server).close()
    except ConnectionRefusedError:
        return True
    return False


def test_sessions_still_running_after_the_grace_period_end_with_shutting_down(
    server_factory: Any, s3_env: S3Env, tmp_path: Path, dataset_name: str
) -> None:
    args = backend_args("s3", s3_env)
    server: ServerProcess = server_factory(*args, "--shutdown-grace", "1")
    a = tmp_path / "a"
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "in", 40, 16_384)), workspace=a)
    slow = ["--limit-rate", "100K", "--parallel", "2", "--keepalive-interval", "0.2", "--workspace", str(a)]
    push = subprocess.Popen(
        [*CLI, "push", dataset_name, f"{server.url}/{dataset_name}", *slow],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # some objects are stored before the shutdown, so the re-run has something to resume (however
    # loaded the machine: the client may still be hashing when the session opens)
    store = S3Store(s3_env.bucket, args[-1], endpoint_url=s3_env.endpoint)
    try:
        wait_until(lambda: any(store.list(f"{dataset_name}/data/")), timeout=60)
    finally:
        store.close()
    assert push.poll() is None, "the push ended before the shutdown (100 KiB/s: it needs about 6 s)"
    server.process.send_signal(signal.SIGTERM)
    started = time.monotonic()
    _, err = push.communicate(timeout=60)
    assert push.returncode == 1 and "ShuttingDown" in err and len(err.strip().splitlines()) == 1, err
    assert time.monotonic() - started < 8  # grace 1 s, then the session ends and the client stops at once
    assert server.process.wait(30) == 0
    again = server_factory(*args, root=server.root)
    assert remote_chain(again, dataset_name, tmp_path / "check") is None  # nothing half-visible
    done = summary(run_cli("push", dataset_name, f"{again.url}/{dataset_name}", "--json", workspace=a))
    assert done["objects_skipped"] > 0 and log_of(a, dataset_name) == remote_chain(again, dataset_name, tmp_path / "c2")
