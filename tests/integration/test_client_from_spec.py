"""A client written from the AsyncAPI document alone pulls a dataset. It imports nothing of the
project: the channel address, subprotocol, message schemas, the tarball's entries and the block and
manifest formats all come from the published document, and every frame is validated against it."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import struct
import tarfile
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from jsonschema import Draft7Validator
from websockets.sync.client import ClientConnection, connect

from tests.conftest import ROOT, ServerProcess, make_files, run_cli

DOCUMENT: dict[str, Any] = yaml.safe_load((ROOT / "asyncapi" / "smart-transfer.asyncapi.yaml").read_text())
SCHEMAS = DOCUMENT["components"]["schemas"]


def schema(name: str) -> Draft7Validator:
    return Draft7Validator({"$ref": f"#/components/schemas/{name}", "components": {"schemas": SCHEMAS}})


def sha256_multihash(data: bytes) -> str:
    """The documented hash text: multibase 'f', code 0x12 (sha2-256), length 0x20, hex digest."""
    return "f1220" + hashlib.sha256(data).hexdigest()


class SpecClient:
    """Sends and receives JSON messages, checking each against the document's schemas."""

    def __init__(self, connection: ClientConnection) -> None:
        self.connection = connection

    def send(self, message: dict[str, Any]) -> None:
        schema(message["type"]).validate(message)
        self.connection.send(json.dumps(message))

    def receive(self, expected: str) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(self.connection.recv(timeout=30))
        schema(message["type"]).validate(message)
        assert message["type"] == expected, message
        return message


def unpack_pack(pack: bytes) -> list[tuple[str, bytes]]:
    """The blocks of a block pack, by the document's x-pack layout (integers as its byteOrder says)."""
    layout = {part["name"]: part for part in DOCUMENT["components"]["messages"]["MetadataTarball"]["x-pack"]["layout"]}
    order = ">" if DOCUMENT["components"]["messages"]["MetadataTarball"]["x-pack"]["byteOrder"] == "big-endian" else "<"
    uint32 = struct.Struct(order + "I")
    magic = bytes.fromhex(layout["magic"]["hex"])
    assert pack[: len(magic)] == magic and layout["count"]["type"] == "uint32"
    (count,) = uint32.unpack_from(pack, len(magic))
    position = len(magic) + uint32.size
    hash_field, size_field = layout["index"]["fields"]
    assert (hash_field["name"], size_field["name"], size_field["type"]) == ("hash", "size", "uint32")
    index = []
    for _ in range(count):
        raw = pack[position : position + hash_field["size"]]
        (size,) = uint32.unpack_from(pack, position + hash_field["size"])
        index.append(("f" + raw.hex(), size))
        position += hash_field["size"] + uint32.size
    blocks = []
    for address, size in index:
        content = pack[position : position + size]
        assert sha256_multihash(content) == address
        blocks.append((address, content))
        position += size
    assert position == len(pack)
    return blocks


def unpack(tarball: bytes) -> tuple[list[tuple[str, bytes]], list[tuple[str, bytes]]]:
    """Blocks and manifests of a metadata tarball, by the document's x-archive description."""
    archive = DOCUMENT["components"]["messages"]["MetadataTarball"]["x-archive"]
    pack_entry, manifest_entry = archive["entries"]
    blocks: list[tuple[str, bytes]] = []
    manifests = []
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(tarball)), mode="r:") as tar:
        for index, member in enumerate(tar):
            source = tar.extractfile(member)
            assert source is not None
            content, address = source.read(), member.name.rpartition("-")[2]
            assert sha256_multihash(content) == address
            if index == 0:
                assert re.fullmatch(pack_entry["name"], member.name)
                blocks = unpack_pack(content)
            else:
                assert re.fullmatch(manifest_entry["name"], member.name)
                manifests.append((address, content))
    return blocks, manifests


def objects_of(blocks: list[tuple[str, bytes]]) -> list[dict[str, Any]]:
    """Data slices (and checkpoint manifests) the blocks reference, per the MetadataBlock schema."""
    found = []
    for _, content in blocks:
        block = json.loads(content)
        schema("MetadataBlock").validate(block)
        event = block["event"]
        if event["type"] == "AddData" and "new_data" in event:
            found.append(
                {"kind": "data", "physical_hash": event["new_data"]["physical_hash"], "size": event["new_data"]["size"]}
            )
    return found


def pull_with_the_document(base_ws: str, dataset: str) -> tuple[list[tuple[str, bytes]], dict[str, bytes]]:
    channel = DOCUMENT["channels"]["pull"]
    headers = channel["bindings"]["ws"]["headers"]["properties"]
    address = channel["address"].replace("{dataset}", dataset)
    with connect(base_ws + address, subprotocols=[headers["Sec-WebSocket-Protocol"]["const"]]) as connection:
        client = SpecClient(connection)
        client.send(
            {
                "type": "DatasetPullRequest",
                "begin_after": None,
                "stop_at": None,
                "force_update_if_diverged": False,
                "known_blocks": [],
            }
        )
        plan = client.receive("DatasetPullResponse")
        client.send({"type": "DatasetPullMetadataRequest"})
        tarball = connection.recv(timeout=30)
        assert isinstance(tarball, bytes)
        blocks, _ = unpack(tarball)
        assert blocks[-1][0] == plan["head"] and len(blocks) == plan["transfer_plan"]["num_blocks"]
        wanted = objects_of(blocks)
        downloaded: dict[str, bytes] = {}
        page = plan["max_objects_per_page"]
        for start in range(0, len(wanted), page):
            client.send({"type": "DatasetPullObjectsTransferRequest", "object_files": wanted[start : start + page]})
            answer = client.receive("DatasetPullObjectsTransferResponse")
            for transfer in answer["object_transfers"]:
                request = transfer["download"]
                body = httpx.request(request["method"], request["url"], headers=request["headers"]).content
                assert sha256_multihash(body) == transfer["object_file"]["physical_hash"]
                downloaded[transfer["object_file"]["physical_hash"]] = body
        client.send({"type": "DatasetPullComplete"})
        with pytest.raises(Exception):  # noqa: B017 - the server closes the finished session
            connection.recv(timeout=10)
        assert str(connection.close_code) in DOCUMENT["x-close-codes"] and connection.close_code == 1000
    return blocks, downloaded


def test_a_client_written_from_the_asyncapi_document_alone_pulls_a_dataset(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    files = make_files(tmp_path / "in", 3, 5000)
    run_cli("add", dataset_name, *map(str, files), workspace=tmp_path / "a")
    assert run_cli("push", dataset_name, f"{smart_server.url}/{dataset_name}", workspace=tmp_path / "a").returncode == 0
    blocks, downloaded = pull_with_the_document(smart_server.url.replace("http://", "ws://"), dataset_name)
    assert len(blocks) == 4
    assert sorted(downloaded.values()) == sorted(f.read_bytes() for f in files)


def test_the_document_says_what_every_error_carries() -> None:
    codes = DOCUMENT["x-error-codes"]
    for code, entry in codes.items():
        assert entry["details"]["$ref"].rsplit("/", 1)[1] in SCHEMAS, code
        assert str(entry["closeCode"]) in DOCUMENT["x-close-codes"]
    error = SCHEMAS["Error"]
    assert set(error["properties"]["code"].get("enum", [])) or "$ref" in json.dumps(error["properties"]["code"])
    assert all(
        "type" in SCHEMAS[name].get("required", []) for name in DOCUMENT["components"]["messages"] if name in SCHEMAS
    )
