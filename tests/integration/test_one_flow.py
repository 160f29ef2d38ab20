"""One protocol core, one sync flow: the defects that came from writing the protocol twice, each shown
fixed on both protocols (smart and simple) and, where storage matters, on both stores."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
from websockets.sync.client import connect

from smart_transfer.cli.exits import CliError
from smart_transfer.client import InvalidUrl, ProgressUpdate, SmartTransferError, SyncClient
from smart_transfer.client.transports.websocket import ClientSession
from smart_transfer.model.objects import NewBlock, referenced_objects
from smart_transfer.protocol import SUBPROTOCOL
from smart_transfer.protocol.messages import (
    DatasetPushComplete,
    DatasetPushCompleteConfirmed,
    DatasetPushMetadataAccepted,
    DatasetPushObjectsTransferRequest,
    DatasetPushObjectsTransferResponse,
    DatasetPushRequest,
    DatasetPushRequestAccepted,
    HttpUpload,
    MetadataTarball,
    ObjectFile,
    TransferPlan,
)
from smart_transfer.protocol.tarball import pack_blocks
from smart_transfer.repo import Workspace
from smart_transfer.storage.digest import digest_file
from tests.conftest import CLI, ServerProcess, backend_args, make_files, run_cli, summary

PROTOCOLS = ["smart", "simple"]


def add(workspace: Path, name: str, tmp: Path, count: int, tag: str) -> None:
    result = run_cli("add", name, *map(str, make_files(tmp / tag, count, 50, tag)), workspace=workspace)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_forced_sync_sends_only_the_blocks_after_the_last_common_block(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, protocol: str
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    url = f"{smart_server.url}/{dataset_name}"
    add(a, dataset_name, tmp_path, 200, "base")
    summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    summary(run_cli("pull", url, "--json", workspace=b))
    add(a, dataset_name, tmp_path, 1, "a")
    summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    add(b, dataset_name, tmp_path, 1, "b")

    refused = run_cli("push", dataset_name, url, "--protocol", protocol, workspace=b)
    assert refused.returncode == 3 and "pull first" in refused.stderr
    forced = summary(run_cli("push", dataset_name, url, "--force", "--protocol", protocol, "--json", workspace=b))
    assert (forced["protocol"], forced["blocks"], forced["objects_transferred"]) == (protocol, 1, 1)

    diverged = run_cli("pull", url, "--protocol", protocol, workspace=a)
    assert diverged.returncode == 3 and "diverged" in diverged.stderr
    pulled = summary(run_cli("pull", url, "--force", "--protocol", protocol, "--json", workspace=a))
    assert (pulled["blocks"], pulled["objects_transferred"]) == (1, 1)
    logs = [run_cli("log", dataset_name, "--json", workspace=w).stdout for w in (a, b)]
    assert logs[0] == logs[1] and len(logs[0].splitlines()) == 202  # Seed, 200 shared, 1 forced


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_pull_repairs_objects_verify_quarantined(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, protocol: str
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    url = f"{smart_server.url}/{dataset_name}"
    add(a, dataset_name, tmp_path, 3, "x")
    summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    summary(run_cli("pull", url, "--json", workspace=b))
    victim = sorted((b / "store" / dataset_name / "data").iterdir())[0]
    victim.write_bytes(b"y" * 50)
    assert run_cli("verify", dataset_name, workspace=b).returncode == 1
    repaired = summary(run_cli("pull", url, "--protocol", protocol, "--json", workspace=b))
    assert (repaired["objects_repaired"], repaired["objects_transferred"], repaired["blocks"]) == (1, 1, 0)
    assert run_cli("verify", dataset_name, workspace=b).returncode == 0


@pytest.fixture
def read_only(server_factory: Any, tmp_path: Path) -> tuple[ServerProcess, str, str]:
    tokens = tmp_path / "tokens.json"

    def token(subject: str, *grants: str) -> str:
        add_token = [*CLI, "token", "add", "--tokens", str(tokens), "--subject", subject, *grants]
        return subprocess.run(add_token, capture_output=True, text=True, check=True).stdout.strip()

    writer, reader = token("writer", "--write", "*"), token("reader", "--read", "*")
    return server_factory("--tokens", str(tokens)), writer, reader


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_read_only_token_is_refused_a_push_as_a_rejection(
    read_only: tuple[ServerProcess, str, str], tmp_path: Path, protocol: str
) -> None:
    server, _, reader = read_only
    add(tmp_path / "a", "ro", tmp_path, 2, "r")
    result = run_cli(
        "push", "ro", f"{server.url}/ro", "--protocol", protocol, "--token", reader, workspace=tmp_path / "a"
    )
    assert result.returncode == 3, result.stderr
    assert "Forbidden" in result.stderr and "Expired" not in result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_progress_is_reported_whatever_the_protocol(
    local_server: ServerProcess, dataset_name: str, tmp_path: Path, protocol: str
) -> None:
    add(tmp_path / "a", dataset_name, tmp_path, 4, "p")
    updates: list[ProgressUpdate] = []
    with SyncClient(tmp_path / "a", protocol=protocol, progress=updates.append) as client:
        client.push(dataset_name, f"{local_server.url}/{dataset_name}")
    assert updates and updates[-1].objects_done == updates[-1].objects_total == 4
    updates.clear()
    with SyncClient(tmp_path / "b", protocol=protocol, progress=updates.append) as client:
        client.pull(f"{local_server.url}/{dataset_name}")
    assert updates and updates[-1].bytes_done == updates[-1].bytes_total == 200


BAD_URLS = [
    ("http://127.0.0.1:1/../x", "invalid path segment"),
    ("http://127.0.0.1:1/a/./x", "invalid path segment"),
    ("http://127.0.0.1:notaport/x", "not a valid URL"),
    ("http://127.0.0.1:99999/x", "not a valid URL"),
    ("http://[::1/x", "not a valid URL"),
    ("ftp://127.0.0.1/x", "not a dataset URL"),
    ("http://127.0.0.1:1/bad..name", "invalid dataset name"),
    ("http://user:hunter2@127.0.0.1:1/x", "credentials do not belong"),
    ("http://user:hun/ter2@127.0.0.1:1/x", "hunter2"),
    ("http://user:hunter2@ss@127.0.0.1:1/x", "credentials do not belong"),
    ("http://user:hunter2#x@127.0.0.1:1/x", "hunter2"),
]


@pytest.mark.parametrize(("url", "fragment"), BAD_URLS)
@pytest.mark.parametrize("command", ["pull", "push", "verify"])
def test_bad_urls_are_usage_errors_that_never_echo_a_password(
    tmp_path: Path, url: str, fragment: str, command: str
) -> None:
    ws = tmp_path / "ws"
    add(ws, "x", tmp_path, 1, "u")
    args = {"pull": ("pull", url), "push": ("push", "x", url), "verify": ("verify", "x", url)}[command]
    for protocol in PROTOCOLS if command != "verify" else ["smart"]:
        extra = ("--protocol", protocol) if command != "verify" else ()
        result = run_cli(*args, *extra, workspace=ws)
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1
        assert fragment == "hunter2" or fragment in result.stderr
        for secret in ("hunter2", "hun/ter2", "ter2"):
            assert secret not in result.stderr + result.stdout


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_path_with_no_server_behind_it_says_so_on_both_protocols(
    local_server: ServerProcess, tmp_path: Path, protocol: str
) -> None:
    result = run_cli("pull", f"{local_server.url}/zzz/small", "--protocol", protocol, workspace=tmp_path / "w")
    assert result.returncode == 1
    assert "NoSuchRoute" in result.stderr and result.stderr.count("\n") == 1


def test_the_sdk_raises_its_own_exceptions(tmp_path: Path) -> None:
    with SyncClient(tmp_path / "w") as client, pytest.raises(InvalidUrl) as caught:
        client.pull("x")
    assert isinstance(caught.value, SmartTransferError) and not isinstance(caught.value, CliError)
    assert not caught.value.remote


def test_a_client_that_gives_up_with_an_error_gets_a_close_frame(local_server: ServerProcess) -> None:
    ws_url = local_server.url.replace("http://", "ws://") + "/gives-up/pull"
    with connect(ws_url, subprotocols=[SUBPROTOCOL]) as connection:  # type: ignore[list-item]
        connection.send(orjson.dumps({"type": "Error", "code": "Timeout", "message": "bye"}).decode())
        with pytest.raises(Exception):  # noqa: B017 - the server closes
            connection.recv(timeout=10)
    assert connection.close_code == 1000  # a close frame, not a dropped connection (1006)


def test_keep_alives_while_the_server_commits_are_absorbed(
    request: pytest.FixtureRequest, server_factory: Any, dataset_name: str, tmp_path: Path
) -> None:
    # on S3 the commit's checks and compare-and-swap take many milliseconds: many keep-alives
    s3 = backend_args("s3", request.getfixturevalue("s3_env"))
    server: ServerProcess = server_factory(*s3, "--keepalive-interval", "0.001")
    ws_path = tmp_path / "a"
    add(ws_path, dataset_name, tmp_path, 40, "k")
    confirmed, progress = asyncio.run(_push_by_hand(server, ws_path, dataset_name))
    assert confirmed.new_head
    assert progress  # the server did send Progress while committing, and the client took it in stride


async def _push_by_hand(server: ServerProcess, workspace: Path, name: str) -> tuple[DatasetPushCompleteConfirmed, bool]:
    import httpx

    ws = Workspace(workspace)
    try:
        dataset = ws.dataset(name)
        blocks = list(dataset.blocks_after(dataset.require_tip(), None))
        refs = [r for h, data in blocks for r in referenced_objects(NewBlock.decode(data, h).block)]
        paths = {str(r.physical_hash): ws.local_store.path_of(dataset.object_key(r)) for r in refs}
    finally:
        ws.close()
    files = [
        ObjectFile(kind="data", physical_hash=h, size=p.stat().st_size, md5=digest_file(p).md5_base64)
        for h, p in paths.items()
    ]
    session = await ClientSession.open(server.url.replace("http://", "ws://") + f"/{name}/push", "push")
    try:
        plan = TransferPlan(num_blocks=len(blocks), num_objects=len(files), bytes_in_objects=0)
        await session.request(DatasetPushRequest(transfer_plan=plan), DatasetPushRequestAccepted)
        await session.request(MetadataTarball(pack_blocks(blocks)), DatasetPushMetadataAccepted)
        answer = await session.request(
            DatasetPushObjectsTransferRequest(object_files=files), DatasetPushObjectsTransferResponse
        )
        async with httpx.AsyncClient() as http:
            for transfer in answer.object_transfers:
                assert isinstance(transfer.transfer, HttpUpload)
                request = transfer.transfer.request
                body = paths[transfer.object_file.physical_hash].read_bytes()
                assert (await http.put(request.url, content=body, headers=request.headers)).status_code == 200
        confirmed = await session.request(DatasetPushComplete(), DatasetPushCompleteConfirmed)
        return confirmed, session.connection.peer_progress is not None
    finally:
        await session.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_forced_push_moves_a_remote_that_is_ahead_back_to_the_local_head(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, protocol: str
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    url = f"{smart_server.url}/{dataset_name}"
    add(a, dataset_name, tmp_path, 2, "base")
    summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    summary(run_cli("pull", url, "--json", workspace=b))
    add(a, dataset_name, tmp_path, 1, "a")
    summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    assert run_cli("push", dataset_name, url, "--protocol", protocol, workspace=b).returncode == 3
    forced = summary(run_cli("push", dataset_name, url, "--force", "--protocol", protocol, "--json", workspace=b))
    # no block is resent: the server moves its head back (sync.rewind_to), whichever the path
    assert (forced["blocks"], forced["up_to_date"]) == (0, False)
    assert (
        forced["new_head"]
        == orjson.loads(run_cli("log", dataset_name, "--json", workspace=b).stdout.splitlines()[0])["hash"]
    )
    again = summary(run_cli("pull", url, "--json", workspace=tmp_path / "c"))
    assert again["new_head"] == forced["new_head"] and again["blocks"] == 3  # Seed and the two shared blocks


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_forced_pull_never_drops_local_blocks_the_remote_is_behind(
    local_server: ServerProcess, dataset_name: str, tmp_path: Path, protocol: str
) -> None:
    a = tmp_path / "a"
    url = f"{local_server.url}/{dataset_name}"
    add(a, dataset_name, tmp_path, 2, "base")
    summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    add(a, dataset_name, tmp_path, 70, "more")  # further ahead than the blocks a request names one by one
    before = run_cli("log", dataset_name, "--json", workspace=a).stdout
    pulled = summary(run_cli("pull", url, "--force", "--protocol", protocol, "--json", workspace=a))
    assert pulled["up_to_date"] and "ahead" in pulled["note"]
    assert run_cli("log", dataset_name, "--json", workspace=a).stdout == before


def test_a_head_move_restores_an_uploaded_block_gc_removed(local_server: ServerProcess, tmp_path: Path) -> None:
    import httpx

    from smart_transfer.model import MetadataBlock, Multihash
    from smart_transfer.model.block import utc_now
    from smart_transfer.model.events import SetInfo

    name = "restored"
    add(tmp_path / "a", name, tmp_path, 1, "r")
    summary(run_cli("push", name, f"{local_server.url}/{name}", "--json", workspace=tmp_path / "a"))
    base = f"{local_server.url}/{name}"
    head = httpx.get(f"{base}/refs/head").text
    block = MetadataBlock(2, Multihash.parse(head), utc_now(), SetInfo("later"))
    address = str(block.hash())
    assert httpx.put(f"{base}/blocks/{address}", content=block.encode()).status_code == 201
    stored = local_server.root / "store" / name / "blocks" / address
    stored.unlink()  # what gc does to a block no chain references yet
    moved = httpx.put(f"{base}/refs/head", content=address, headers={"If-Match": f'"{head}"'})
    assert moved.status_code == 200, moved.text
    # head never names a block the store lacks: the head move stored its blocks as a pack
    from smart_transfer.model import DatasetName
    from smart_transfer.repo.packs import DatasetBlocks
    from smart_transfer.storage.local import LocalStore

    packs = DatasetBlocks(LocalStore(local_server.root / "store"), DatasetName(name))
    assert any(dict(packs.read(p.key)).get(block.hash()) == block.encode() for p in packs.packs())


def test_a_rerun_simple_push_does_not_resend_staged_objects(
    local_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    import httpx

    a = tmp_path / "a"
    add(a, dataset_name, tmp_path, 3, "s")
    objects = sorted((a / "store" / dataset_name / "data").iterdir())
    for path in objects:  # an earlier push uploaded the objects, then died before moving head
        staged = httpx.put(f"{local_server.url}/{dataset_name}/data/{path.name}", content=path.read_bytes())
        assert staged.status_code == 202
    pushed = summary(
        run_cli(
            "push", dataset_name, f"{local_server.url}/{dataset_name}", "--protocol", "simple", "--json", workspace=a
        )
    )
    assert pushed["bytes_transferred"] == 0 and pushed["blocks"] == 4
