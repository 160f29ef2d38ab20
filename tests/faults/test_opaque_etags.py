"""The commit check where the store's ETag is not the MD5 of the bytes (AWS with SSE-KMS), through the
fault proxy in front of the real local S3 answering as AWS does (``Proxy.answer_like_aws_kms``): the
server confirms the bytes by reading them back, or by the SHA-256 checksum the store checked on arrival
(``--s3-checksum-sha256``); it commits what it confirmed, and damage is still refused."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from smart_transfer.client.transports.websocket import RemoteError
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.storage.s3 import S3Store
from tests.conftest import S3Env, ServerProcess, make_files, run_cli, start_server, summary
from tests.faults.proxy import AwsKmsAnswers, Proxy
from tests.integration.test_protocol_sessions import _push_without_some_uploads

KMS_KEY = "testkey-1"
KIB, MIB = 1024, 1024 * 1024


@dataclass
class Stage:
    """A server whose every S3 call, and its clients', passes the proxy answering as AWS with SSE-KMS."""

    proxy: Proxy
    kms: AwsKmsAnswers
    server: ServerProcess
    prefix: str
    s3: S3Env

    def store(self, through_proxy: bool) -> S3Store:
        """A store on the server's prefix: through the proxy (seen as AWS would see it), or straight."""
        endpoint = self.proxy.url if through_proxy else self.s3.endpoint
        return S3Store(self.s3.bucket, self.prefix, endpoint_url=endpoint, sse="aws:kms", sse_kms_key_id=KMS_KEY)

    def server_gets(self, name: str) -> list[str]:
        """The GETs of the dataset's data objects made so far (a push's client makes none: the server's)."""
        return [path for method, path, _ in self.proxy.requests if method == "GET" and f"/{name}/data/" in path]


StageFactory = Callable[..., Stage]


@pytest.fixture
def stage(s3_env: S3Env, tmp_path: Path) -> Iterator[StageFactory]:
    started: list[Stage] = []

    def start(*extra: str) -> Stage:
        proxy = Proxy(s3_env.endpoint)
        kms = proxy.answer_like_aws_kms()
        prefix = f"srv-{secrets.token_hex(6)}"
        server = start_server(
            tmp_path / f"server-{len(started)}",
            *("--s3-endpoint", proxy.url, "--s3-bucket", s3_env.bucket, "--s3-prefix", prefix),
            *("--multipart-threshold", "6M", "--part-size", "5M"),
            *extra,
        )
        server.backend = "s3"
        started.append(Stage(proxy, kms, server, prefix, s3_env))
        return started[-1]

    yield start
    for each in started:
        each.server.stop()
        each.proxy.stop()


def _push_and_pull(stage: Stage, tmp_path: Path, name: str, files: int) -> None:
    url = f"{stage.server.url}/{name}"
    workspace = tmp_path / "a"
    paths = make_files(tmp_path / "in", files, 20 * KIB) + make_files(tmp_path / "big", 1, 11 * MIB, "big")
    assert run_cli("add", name, *map(str, paths), workspace=workspace).returncode == 0
    pushed = summary(run_cli("push", name, url, "--json", workspace=workspace))
    assert pushed["objects_transferred"] == files + 1
    pulled = summary(run_cli("pull", url, "--json", workspace=tmp_path / "b"))
    assert pulled["objects_transferred"] == files + 1


def test_opaque_etags_commit_the_bytes_read_back(stage: StageFactory, tmp_path: Path) -> None:
    on = stage("--s3-sse", "aws:kms", "--s3-sse-kms-key-id", KMS_KEY)
    info = on.store(through_proxy=True)
    name = f"opaque-{secrets.token_hex(3)}"
    _push_and_pull(on, tmp_path, name, 2)
    # every object (one of them assembled from parts under opaque part tags) was read back at the commit
    assert len({path.split("?")[0] for path in on.server_gets(name)}) >= 3
    listed = list(info.list(f"{name}/data/"))
    assert len(listed) == 3 and all(each.opaque_etag for each in listed)
    head = info.head(listed[0].key)
    assert head is not None and head.opaque_etag and head.etag == listed[0].etag  # AWS's tags are stable
    info.close()


def test_damage_behind_an_opaque_etag_is_refused(stage: StageFactory, tmp_path: Path) -> None:
    on = stage("--s3-sse", "aws:kms", "--s3-sse-kms-key-id", KMS_KEY)
    name = f"damaged-{secrets.token_hex(3)}"
    workspace = tmp_path / "ws"
    run_cli("add", name, *map(str, make_files(tmp_path / "in", 1, 1000)), workspace=workspace)
    straight = on.store(through_proxy=False)

    def tamper(physical_hash: str) -> None:
        straight.put(f"{name}/data/{physical_hash}", b"y" * 1000)  # same size, other bytes

    with pytest.raises(RemoteError) as caught:
        asyncio.run(_push_without_some_uploads(on.server, workspace, name, tamper))
    straight.close()
    assert caught.value.code is ErrorCode.UPLOAD_INVALID
    assert "content does not match its hash" in caught.value.message
    result = run_cli("pull", f"{on.server.url}/{name}", workspace=tmp_path / "check")
    assert result.returncode == 1 and "does not exist" in result.stderr


def test_a_bucket_encrypting_by_default_is_confirmed_by_reading_back(stage: StageFactory, tmp_path: Path) -> None:
    # no --s3-sse: the server learns from a HEAD that the ETags its listing showed are opaque
    on = stage()
    name = f"default-{secrets.token_hex(3)}"
    _push_and_pull(on, tmp_path, name, 9)  # enough objects for one listing instead of their HEADs
    assert any("list-type=2" in path for method, path, _ in on.proxy.requests if method == "GET")
    assert len({path.split("?")[0] for path in on.server_gets(name)}) == 10


def test_the_stores_checksum_confirms_without_reading_back(stage: StageFactory, tmp_path: Path) -> None:
    on = stage("--s3-sse", "aws:kms", "--s3-sse-kms-key-id", KMS_KEY, "--s3-checksum-sha256")
    name = f"checked-{secrets.token_hex(3)}"
    workspace = tmp_path / "a"
    assert (
        run_cli("add", name, *map(str, make_files(tmp_path / "in", 3, 20 * KIB)), workspace=workspace).returncode == 0
    )
    summary(run_cli("push", name, f"{on.server.url}/{name}", "--json", workspace=workspace))
    assert len([key for key in on.kms.checksums if f"/{name}/data/" in key]) == 3  # checked on arrival
    assert on.server_gets(name) == []  # the checksums confirmed every object: nothing read back

    # an object replaced without a checksum (as AWS keeps none then) is read back, and its damage refused
    other = f"checked-{secrets.token_hex(3)}"
    workspace = tmp_path / "b"
    run_cli("add", other, *map(str, make_files(tmp_path / "other", 1, 1000)), workspace=workspace)
    proxied = on.store(through_proxy=True)

    def tamper(physical_hash: str) -> None:
        proxied.put(f"{other}/data/{physical_hash}", b"z" * 1000)

    with pytest.raises(RemoteError) as caught:
        asyncio.run(_push_without_some_uploads(on.server, workspace, other, tamper))
    proxied.close()
    assert caught.value.code is ErrorCode.UPLOAD_INVALID
    assert "content does not match its hash" in caught.value.message
