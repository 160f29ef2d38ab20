"""The SDK used as a library: the sync facade, progress callbacks, typed errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from smart_transfer.client import ClientOptions, DivergedError, ProgressUpdate, RemoteError, SyncClient
from smart_transfer.client.remote import RemoteDataset
from smart_transfer.client.transports.simple import SimpleTransport
from smart_transfer.config import SettingError
from smart_transfer.protocol.codes import ErrorCode
from tests.conftest import ServerProcess, make_files, run_cli


def test_sync_client_pulls_and_pushes_with_progress(local_server: ServerProcess, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    run_cli("add", "sdk", *map(str, make_files(tmp_path / "in", 5, 10_000)), workspace=a)
    updates: list[ProgressUpdate] = []
    with SyncClient(a, parallel=2, progress=updates.append) as client:
        pushed = client.push("sdk", f"{local_server.url}/sdk")
    assert (pushed.blocks, pushed.objects_transferred, pushed.bytes_transferred) == (6, 5, 50_000)
    assert updates[-1].objects_done == updates[-1].objects_total == 5
    assert updates[-1].bytes_done == updates[-1].bytes_total == 50_000
    assert [u.bytes_done for u in updates] == sorted(u.bytes_done for u in updates)
    with SyncClient(b) as client:
        pulled = client.pull(f"{local_server.url}/sdk", as_name="copy")
        assert pulled.new_head == pushed.new_head
        assert client.workspace.dataset("copy").require_tip().head.__str__() == pushed.new_head


def test_sdk_errors_are_typed(local_server: ServerProcess, tmp_path: Path) -> None:
    with SyncClient(tmp_path / "x") as client, pytest.raises(RemoteError) as caught:
        client.pull(f"{local_server.url}/never-created")
    assert caught.value.code is ErrorCode.DATASET_NOT_FOUND
    a, b = tmp_path / "a", tmp_path / "b"
    files = make_files(tmp_path / "in", 2, 10)
    run_cli("add", "fork", str(files[0]), workspace=a)
    run_cli("add", "fork", str(files[1]), workspace=b)
    with SyncClient(a) as client:
        client.push("fork", f"{local_server.url}/fork")
    with SyncClient(b) as client, pytest.raises(DivergedError):
        client.push("fork", f"{local_server.url}/fork")


class CountingTransport(SimpleTransport):
    """The simple transport, counting the sessions it opens: a caller's own transport, injected."""

    def __init__(self, options: ClientOptions) -> None:
        super().__init__(None, options)
        self.opened = 0

    def pull(self, remote: RemoteDataset) -> Any:
        self.opened += 1
        return super().pull(remote)

    def push(self, remote: RemoteDataset) -> Any:
        self.opened += 1
        return super().push(remote)


def test_a_client_runs_every_operation_over_an_injected_transport(local_server: ServerProcess, tmp_path: Path) -> None:
    run_cli("add", "injected", *map(str, make_files(tmp_path / "in", 3, 100)), workspace=tmp_path / "a")
    options = ClientOptions(parallel=2, answer_timeout=30)
    transport = CountingTransport(options)
    with SyncClient(tmp_path / "a", options, transport=transport) as client:
        pushed = client.push("injected", f"{local_server.url}/injected")
    with SyncClient(tmp_path / "b", options, transport=transport) as client:
        pulled = client.pull(f"{local_server.url}/injected")
    assert (pushed.protocol, pulled.protocol) == ("simple", "simple")  # the options say smart
    assert transport.opened == 2 and pulled.new_head == pushed.new_head


def test_client_options_refuse_values_out_of_range_naming_the_option() -> None:
    with pytest.raises(SettingError, match=r"--parallel must be 1\.\.1024, not 0"):
        ClientOptions(parallel=0)
    with pytest.raises(ValueError, match="--answer-timeout"):
        SyncClient(None, answer_timeout=-1)


def test_a_simple_protocol_transfer_opens_one_connection_pool(
    local_server: ServerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Objects of the simple protocol go to the server, like its REST calls: one pool of --parallel."""
    from smart_transfer.client.transports import simple
    from smart_transfer.transfer import aio

    opened: list[int] = []
    real = aio.make_session

    def counting(parallel: int, timeouts: Any = None) -> Any:
        opened.append(parallel)
        return real(parallel, timeouts)

    monkeypatch.setattr(aio, "make_session", counting)
    monkeypatch.setattr(simple, "make_session", counting)
    run_cli("add", "pooled", *map(str, make_files(tmp_path / "in", 4, 100)), workspace=tmp_path / "a")
    with SyncClient(tmp_path / "a", protocol="simple", parallel=3) as client:
        pushed = client.push("pooled", f"{local_server.url}/pooled")
    assert (pushed.objects_transferred, opened) == (4, [3])
    with SyncClient(tmp_path / "b", protocol="simple", parallel=3) as client:
        pulled = client.pull(f"{local_server.url}/pooled")
    assert (pulled.objects_transferred, opened) == (4, [3, 3])


#: A host process that embeds the SDK with a collector policy of its own: a pull and a push must leave
#: it exactly as they found it (nothing frozen or unfrozen, enabled or disabled, thresholds kept).
_EMBEDDING_HOST = """
import gc, json, sys
from smart_transfer.client import SyncClient
keep = [[object()] for _ in range(1000)]
gc.freeze()  # the host's own frozen objects (a pre-fork server does this)
gc.set_threshold(1234, 7, 9)
if sys.argv[4] == "off":
    gc.disable()
def state():
    return {"enabled": gc.isenabled(), "frozen": gc.get_freeze_count(), "threshold": gc.get_threshold()}
before = state()
with SyncClient(sys.argv[1]) as client:
    client.push("embedded", sys.argv[3])
with SyncClient(sys.argv[2]) as client:
    client.pull(sys.argv[3], as_name="copy")
print(json.dumps({"before": before, "after": state()}))
"""


@pytest.mark.parametrize("collector", ["on", "off"])
def test_an_embedding_process_keeps_its_collector_state(
    local_server: ServerProcess, tmp_path: Path, collector: str
) -> None:
    run_cli("add", "embedded", *map(str, make_files(tmp_path / "in", 4, 1000)), workspace=tmp_path / "a")
    url = f"{local_server.url}/embedded-{collector}"
    result = subprocess.run(
        [sys.executable, "-c", _EMBEDDING_HOST, str(tmp_path / "a"), str(tmp_path / "b"), url, collector],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    states = json.loads(result.stdout)
    assert states["after"] == states["before"]
    assert states["before"]["frozen"] > 0 and states["before"]["enabled"] is (collector == "on")
