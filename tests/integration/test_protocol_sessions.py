"""The protocol as a hostile or broken client sees it: raw WebSocket frames against a real server.
Every misuse ends in a typed Error message, then a close frame, and changes nothing."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import orjson
import pytest
from websockets.sync.client import ClientConnection, connect

from smart_transfer.client.transports.websocket import ClientSession, RemoteError
from smart_transfer.model import Multihash
from smart_transfer.protocol import SUBPROTOCOL
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.connection import close_code_of
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
from smart_transfer.repo.layout import ObjectKind
from tests.conftest import ServerProcess, make_files, run_cli


def ws_url(server: ServerProcess, path: str) -> str:
    return server.url.replace("http://", "ws://") + path


@pytest.fixture
def raw(local_server: ServerProcess) -> Iterator[ClientConnection]:
    with connect(ws_url(local_server, "/anything/pull"), subprotocols=[SUBPROTOCOL]) as connection:  # type: ignore[list-item]
        yield connection


def expect_error(connection: ClientConnection, code: str, fragment: str = "") -> dict[str, object]:
    message = orjson.loads(connection.recv(timeout=10))
    assert message["type"] == "Error", message
    assert message["code"] == code, message
    assert fragment in message["message"], message
    with pytest.raises(Exception):  # noqa: B017 - the server closes right after the error
        connection.recv(timeout=10)
    assert connection.close_code == close_code_of(ErrorCode(code))
    assert len((connection.close_reason or "").encode()) <= 123
    return message


@pytest.mark.parametrize(
    ("frame", "code", "fragment"),
    [
        ("not json", "BadMessage", "not valid JSON"),
        ("[1, 2]", "BadMessage", ""),
        ('{"type": "Nope"}', "BadMessage", ""),
        ('{"type": "DatasetPullRequest", "begin_after": "f1220zz"}', "BadMessage", "begin_after"),
        ('{"type": "DatasetPullRequest", "force_update_if_diverged": "yes"}', "BadMessage", "force_update"),
        ('{"type": "DatasetPullRequest", "surprise": 1}', "BadMessage", "surprise"),
        ('{"type": "DatasetPullMetadataRequest"}', "UnexpectedMessage", "phase AwaitRequest"),
        (
            '{"type": "DatasetPushRequest", "transfer_plan": {"num_blocks": 0, "num_objects": 0, '
            '"bytes_in_objects": 0}}',
            "UnexpectedMessage",
            "pull: client sent DatasetPushRequest",
        ),
        (b"\x1f\x8b binary first", "UnexpectedMessage", "MetadataTarball"),
        ("x" * (5 * 1024 * 1024), "MessageTooLarge", ""),
    ],
)
def test_malformed_or_misplaced_messages_get_a_typed_error(
    raw: ClientConnection, frame: str | bytes, code: str, fragment: str
) -> None:
    raw.send(frame)
    expect_error(raw, code, fragment)


def test_a_session_without_the_subprotocol_is_refused(local_server: ServerProcess) -> None:
    with connect(ws_url(local_server, "/x/pull")) as connection:
        expect_error(connection, "UnsupportedProtocol", SUBPROTOCOL)


@pytest.mark.parametrize("name", ["a..b", "_store", "%2e%2e"])
def test_bad_dataset_names_in_the_path_get_a_typed_error(local_server: ServerProcess, name: str) -> None:
    with connect(ws_url(local_server, f"/{name}/pull"), subprotocols=[SUBPROTOCOL]) as connection:  # type: ignore[list-item]
        expect_error(connection, "InvalidDatasetName")  # said at once, before the client speaks


def test_pull_of_objects_outside_the_dataset_gets_no_url(local_server: ServerProcess, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    run_cli("add", "owned", *map(str, make_files(tmp_path / "in", 1, 10)), workspace=ws)
    assert run_cli("push", "owned", f"{local_server.url}/owned", workspace=ws).returncode == 0
    with connect(ws_url(local_server, "/owned/pull"), subprotocols=[SUBPROTOCOL]) as connection:  # type: ignore[list-item]
        connection.send('{"type": "DatasetPullRequest"}')
        assert orjson.loads(connection.recv(timeout=10))["type"] == "DatasetPullResponse"
        connection.send('{"type": "DatasetPullMetadataRequest"}')
        assert isinstance(connection.recv(timeout=10), bytes)
        foreign = {"kind": "data", "physical_hash": "f1220" + "ab" * 32, "size": 10}
        connection.send(orjson.dumps({"type": "DatasetPullObjectsTransferRequest", "object_files": [foreign]}).decode())
        expect_error(connection, "ObjectNotFound", "no committed data")  # the signer's one refusal


def test_clients_follow_the_servers_page_limit_and_larger_pages_are_refused(
    server_factory: object, tmp_path: Path
) -> None:
    server: ServerProcess = server_factory("--max-objects-per-page", "2")  # type: ignore[operator]
    ws = tmp_path / "ws"
    run_cli("add", "paged", *map(str, make_files(tmp_path / "in", 5, 10)), workspace=ws)
    # the server announces its limit; the SDK pages by it (5 objects -> 3 pages) both ways
    assert run_cli("push", "paged", f"{server.url}/paged", workspace=ws).returncode == 0
    assert run_cli("pull", f"{server.url}/paged", workspace=tmp_path / "copy").returncode == 0
    # a client that ignores the limit is refused with a typed error
    with connect(ws_url(server, "/paged/pull"), subprotocols=[SUBPROTOCOL]) as connection:  # type: ignore[list-item]
        connection.send('{"type": "DatasetPullRequest"}')
        response = orjson.loads(connection.recv(timeout=10))
        assert response["max_objects_per_page"] == 2
        connection.send('{"type": "DatasetPullMetadataRequest"}')
        connection.recv(timeout=10)
        files = [{"kind": "data", "physical_hash": "f1220" + f"{i:02x}" * 32, "size": 10} for i in range(3)]
        connection.send(orjson.dumps({"type": "DatasetPullObjectsTransferRequest", "object_files": files}).decode())
        expect_error(connection, "TooManyObjects", "at most 2")


async def _push_without_some_uploads(server: ServerProcess, workspace: Path, name: str, tamper: object | None) -> None:
    """Run the push flow by hand, uploading only the first object, then complete."""
    ws = Workspace(workspace)
    try:
        dataset = ws.dataset(name)
        tip = dataset.require_tip()
        blocks = list(dataset.blocks_after(tip, None))
        refs = []
        for _, data in blocks:
            from smart_transfer.model.objects import NewBlock, referenced_objects

            refs.extend(referenced_objects(NewBlock.decode(data).block))
        files = []
        for ref in refs:
            content = ws.store.get(dataset.object_key(ref))
            md5 = base64.b64encode(hashlib.md5(content).digest()).decode()
            files.append(ObjectFile(kind=ref.kind.value, physical_hash=str(ref.physical_hash), size=ref.size, md5=md5))
    finally:
        ws.close()
    session = await ClientSession.open(ws_url(server, f"/{name}/push"), "push")
    try:
        plan = TransferPlan(num_blocks=len(blocks), num_objects=len(files), bytes_in_objects=0)
        await session.request(DatasetPushRequest(current_head=None, transfer_plan=plan), DatasetPushRequestAccepted)
        await session.request(MetadataTarball(pack_blocks(blocks)), DatasetPushMetadataAccepted)
        answer = await session.request(
            DatasetPushObjectsTransferRequest(object_files=files), DatasetPushObjectsTransferResponse
        )
        uploads = [t for t in answer.object_transfers if isinstance(t.transfer, HttpUpload)]
        assert len(uploads) == len(files)
        first = uploads[0]
        assert isinstance(first.transfer, HttpUpload)
        content = (workspace / "store" / name / ObjectKind.DATA.value / first.object_file.physical_hash).read_bytes()
        response = httpx.put(first.transfer.request.url, content=content, headers=first.transfer.request.headers)
        assert response.status_code == 200
        if callable(tamper):
            tamper(first.object_file.physical_hash)
        await session.request(DatasetPushComplete(), DatasetPushCompleteConfirmed)
    finally:
        await session.close()


def test_a_push_with_missing_uploads_is_refused_at_completion(smart_server: ServerProcess, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    run_cli("add", "partial", *map(str, make_files(tmp_path / "in", 3, 1000)), workspace=ws)
    with pytest.raises(RemoteError) as caught:
        asyncio.run(_push_without_some_uploads(smart_server, ws, "partial", None))
    assert caught.value.code is ErrorCode.UPLOAD_INVALID
    assert "2 object(s) missing or wrong" in caught.value.message
    assert caught.value.raw_details["count"] == 2
    # the remote head did not move: the dataset still does not exist there
    result = run_cli("pull", f"{smart_server.url}/partial", workspace=tmp_path / "check")
    assert result.returncode == 1 and "does not exist" in result.stderr


def test_a_push_whose_upload_was_replaced_is_refused(
    smart_server: ServerProcess, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from tests.integration.test_smart_transfer import _overwrite_remote_object

    ws = tmp_path / "ws"
    run_cli("add", "swapped", *map(str, make_files(tmp_path / "in", 1, 1000)), workspace=ws)

    def tamper(physical_hash: str) -> None:
        _overwrite_remote_object(smart_server, request, f"swapped/data/{physical_hash}", b"y" * 1000)

    with pytest.raises(RemoteError) as caught:
        asyncio.run(_push_without_some_uploads(smart_server, ws, "swapped", tamper))
    assert caught.value.code is ErrorCode.UPLOAD_INVALID
    assert "does not match the promised MD5" in caught.value.message
    result = run_cli("pull", f"{smart_server.url}/swapped", workspace=tmp_path / "check")
    assert result.returncode == 1 and "does not exist" in result.stderr


async def _push_nothing(server: ServerProcess, name: str, request: DatasetPushRequest) -> DatasetPushCompleteConfirmed:
    """A push session that sends no block: what a forced push back to an older block of the chain is."""
    session = await ClientSession.open(ws_url(server, f"/{name}/push"), "push")
    try:
        await session.request(request, DatasetPushRequestAccepted)
        await session.request(MetadataTarball(pack_blocks([])), DatasetPushMetadataAccepted)
        return await session.request(DatasetPushComplete(), DatasetPushCompleteConfirmed)
    finally:
        await session.close()


def test_a_push_to_an_older_target_head_moves_head_back_only_with_force(
    local_server: ServerProcess, tmp_path: Path
) -> None:
    ws, name = tmp_path / "ws", "rewound"
    url = f"{local_server.url}/{name}"
    heads = []
    for tag in ("one", "two"):
        run_cli("add", name, *map(str, make_files(tmp_path / tag, 1, 100, tag)), workspace=ws)
        assert run_cli("push", name, url, workspace=ws).returncode == 0
        heads.append(httpx.get(f"{url}/refs/head").text)
    older, head = heads
    plan = TransferPlan(num_blocks=0, num_objects=0, bytes_in_objects=0)

    def pushed(force: bool, target: str | None) -> DatasetPushCompleteConfirmed:
        request = DatasetPushRequest(
            current_head=head, transfer_plan=plan, force_update_if_diverged=force, target_head=target
        )
        return asyncio.run(_push_nothing(local_server, name, request))

    with pytest.raises(RemoteError) as refused:
        pushed(False, older)
    assert refused.value.code is ErrorCode.DIVERGED and "needs force" in refused.value.message
    assert httpx.get(f"{url}/refs/head").text == head  # nothing changed
    confirmed = pushed(False, None)  # an older client says no target: a push only adds blocks
    assert (confirmed.old_head, confirmed.new_head) == (head, head)
    confirmed = pushed(True, older)
    assert (confirmed.old_head, confirmed.new_head) == (head, older)
    assert httpx.get(f"{url}/refs/head").text == older


def test_pushed_blocks_must_end_at_the_target_head(local_server: ServerProcess, tmp_path: Path) -> None:
    ws, name = tmp_path / "ws", "targeted"
    run_cli("add", name, *map(str, make_files(tmp_path / "in", 1, 100)), workspace=ws)
    workspace = Workspace(ws)
    try:
        dataset = workspace.dataset(name)
        blocks = list(dataset.blocks_after(dataset.require_tip(), None))
    finally:
        workspace.close()
    plan = TransferPlan(num_blocks=len(blocks), num_objects=1, bytes_in_objects=100)

    async def push() -> None:
        session = await ClientSession.open(ws_url(local_server, f"/{name}/push"), "push")
        try:
            request = DatasetPushRequest(transfer_plan=plan, target_head=str(blocks[0][0]))  # the Seed, not the head
            await session.request(request, DatasetPushRequestAccepted)
            await session.request(MetadataTarball(pack_blocks(blocks)), DatasetPushMetadataAccepted)
        finally:
            await session.close()

    with pytest.raises(RemoteError) as refused:
        asyncio.run(push())
    assert refused.value.code is ErrorCode.INVALID_BLOCKS and "target head" in refused.value.message
    assert httpx.get(f"{local_server.url}/{name}/refs/head").status_code == 404  # nothing was created


@contextmanager
def _push_session(
    server: ServerProcess, name: str, base: str, blocks: list[tuple[Multihash, bytes]]
) -> Iterator[ClientConnection]:
    """A push session, as a client written from the documents opens one: request, blocks, terms."""
    with connect(ws_url(server, f"/{name}/push"), subprotocols=[SUBPROTOCOL]) as connection:  # type: ignore[list-item]
        plan = {"num_blocks": len(blocks), "num_objects": 2, "bytes_in_objects": 2000}
        request = {"type": "DatasetPushRequest", "current_head": base, "transfer_plan": plan}
        connection.send(orjson.dumps({**request, "target_head": str(blocks[-1][0])}).decode())
        assert orjson.loads(connection.recv(timeout=10))["type"] == "DatasetPushRequestAccepted"
        connection.send(pack_blocks(blocks))
        assert orjson.loads(connection.recv(timeout=10))["type"] == "DatasetPushMetadataAccepted"
        yield connection


def _answers(connection: ClientConnection, *offers: dict[str, object]) -> list[dict[str, object]]:
    connection.send(orjson.dumps({"type": "DatasetPushObjectsTransferRequest", "object_files": offers}).decode())
    answer = orjson.loads(connection.recv(timeout=10))
    assert answer["type"] == "DatasetPushObjectsTransferResponse", answer
    named = [{key: t["object_file"][key] for key in ("kind", "physical_hash")} for t in answer["object_transfers"]]
    assert named == [{key: offer[key] for key in ("kind", "physical_hash")} for offer in offers]
    return [t["transfer"] for t in answer["object_transfers"]]


def test_a_push_offer_without_md5s_asks_whether_the_server_holds_the_object(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    """A client written from the documents: an object offered without md5 and part_md5s is a question,
    answered SkipUpload (committed) or NotHeld (``stored`` once an interrupted push left a copy), with
    nothing started or signed; the same object offered with its MD5 gets its upload as before."""
    ws, url = tmp_path / "ws", f"{smart_server.url}/{dataset_name}"
    kept, new = make_files(tmp_path / "in", 2, 1000)
    run_cli("add", dataset_name, str(kept), workspace=ws)
    assert run_cli("push", dataset_name, url, workspace=ws).returncode == 0
    base = httpx.get(f"{url}/refs/head").text
    run_cli("add", dataset_name, str(kept), str(new), workspace=ws)  # the first one's object again, and a new one
    workspace = Workspace(ws)
    try:
        dataset = workspace.dataset(dataset_name)
        blocks = list(dataset.blocks_after(dataset.require_tip(), Multihash.parse(base)))
    finally:
        workspace.close()
    kept_q, new_q = (
        {"kind": "data", "physical_hash": str(Multihash.of(path.read_bytes())), "size": 1000} for path in (kept, new)
    )
    new_md5 = {**new_q, "md5": base64.b64encode(hashlib.md5(new.read_bytes()).digest()).decode()}
    with _push_session(smart_server, dataset_name, base, blocks) as connection:
        assert _answers(connection, kept_q, new_q) == [{"type": "SkipUpload"}, {"type": "NotHeld", "stored": False}]
        assert httpx.head(f"{url}/data/{new_q['physical_hash']}").status_code == 404
        (upload,) = _answers(connection, new_md5)  # an offer with its MD5, as before: a URL to PUT it to
        assert upload["type"] == "HttpUpload", upload
        request = upload["request"]
        assert isinstance(request, dict)
        assert httpx.put(request["url"], content=new.read_bytes(), headers=request["headers"]).status_code == 200
    # that session ended before its commit: the copy it uploaded is stored, not committed
    with _push_session(smart_server, dataset_name, base, blocks) as connection:
        assert _answers(connection, new_q) == [{"type": "NotHeld", "stored": True}]
        assert _answers(connection, new_md5) == [{"type": "SkipUpload"}]  # its MD5 vouches for the copy
        connection.send('{"type": "DatasetPushComplete"}')
        while (confirmed := orjson.loads(connection.recv(timeout=30)))["type"] == "Progress":
            pass
        assert confirmed == {"type": "DatasetPushCompleteConfirmed", "old_head": base, "new_head": str(blocks[-1][0])}
    assert httpx.head(f"{url}/data/{new_q['physical_hash']}", follow_redirects=False).status_code in (200, 307)
