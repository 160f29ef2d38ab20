"""A server whose writes must carry SSE-KMS (``--s3-sse aws:kms``) on the local Ceph with its SSE-KMS
testing backend: every object it and its clients write is stored encrypted (HEAD says so), and every
face works: smart and simple pushes and pulls (objects in one PUT and in parts), Delta Sharing reads
and the web view's downloads. A PUT without the signed encryption headers is refused by the store."""

from __future__ import annotations

import io
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
import delta_sharing
import httpx
import pandas as pd
import pyarrow.parquet as pq
import pytest
from botocore.config import Config

from smart_transfer.client import open_dataset
from smart_transfer.server.ui.visitor import COOKIE
from smart_transfer.storage.s3 import S3Store
from tests.conftest import S3Env, ServerProcess, make_files, run_cli, start_server, summary
from tests.integration.test_delta_sharing import SCHEMA, SHARE, add_typed
from tests.integration.test_security import token
from tests.slices import add_slices

#: The testing backend's key (scripts/s3-local.sh: ``rgw crypt s3 kms encryption keys``).
KMS_KEY = "testkey-1"
MIB = 1024 * 1024


@dataclass
class Encrypted:
    server: ServerProcess
    prefix: str
    writer: str
    tokens: Path
    s3: S3Env

    def cookies(self) -> dict[str, str]:
        """The web view's sign-in cookie of the writer."""
        return {COOKIE: self.writer}

    def cli(self, *args: str, workspace: Path) -> dict[str, object]:
        return summary(run_cli(*args, "--token", self.writer, "--json", workspace=workspace))

    def encryption_of_every_object(self) -> dict[str, str]:
        """Key -> the encryption a HEAD reports, for every object under the server's prefix."""
        client = boto3.session.Session().client(
            "s3",
            endpoint_url=self.s3.endpoint,
            config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
        )
        found = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.s3.bucket, Prefix=self.prefix + "/"):
            for item in page.get("Contents", []):
                head = client.head_object(Bucket=self.s3.bucket, Key=item["Key"])
                found[item["Key"]] = str(head.get("ServerSideEncryption", "none"))
        client.close()
        return found


@pytest.fixture(scope="module")
def encrypted(s3_env: S3Env, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Encrypted]:
    root = tmp_path_factory.mktemp("encrypted")
    tokens = root / "tokens.json"
    writer = token(tokens, "writer", "--write", "*")
    prefix = f"srv-{secrets.token_hex(6)}"
    server = start_server(
        root / "server",
        "--tokens",
        str(tokens),
        "--s3-endpoint",
        s3_env.endpoint,
        "--s3-bucket",
        s3_env.bucket,
        "--s3-prefix",
        prefix,
        "--s3-sse",
        "aws:kms",
        "--s3-sse-kms-key-id",
        KMS_KEY,
        "--multipart-threshold",
        "6M",
        "--part-size",
        "5M",
    )
    server.backend = "s3"
    yield Encrypted(server, prefix, writer, tokens, s3_env)
    server.stop()


def test_every_face_works_and_every_object_is_stored_encrypted(encrypted: Encrypted, tmp_path: Path) -> None:
    tag = secrets.token_hex(3)
    name, big_name, simple_name = f"enc-{tag}", f"encb-{tag}", f"encs-{tag}"
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    url = f"{encrypted.server.url}/{name}"
    add_typed(a, name, tmp_path / "typed", [30, 20])
    add_slices(a, big_name, tmp_path / "big", [700], padding=12 * 1024)  # ~8.6 MB: pushed in parts
    assert encrypted.cli("push", name, url, workspace=a)["objects_transferred"] == 2
    big_url = f"{encrypted.server.url}/{big_name}"
    assert encrypted.cli("push", big_name, big_url, workspace=a)["objects_transferred"] == 1
    encrypted.cli("pull", url, workspace=b)
    encrypted.cli("pull", big_url, workspace=b)
    for each in (name, big_name):
        with open_dataset(a, each) as mine, open_dataset(b, each) as theirs:
            pd.testing.assert_frame_equal(mine.to_pandas(), theirs.to_pandas())
    # the simple protocol: objects through the server, which writes them encrypted itself
    run_cli("add", simple_name, *map(str, make_files(tmp_path / "files", 3, 2000)), workspace=a)
    simple_url = f"{encrypted.server.url}/{simple_name}"
    encrypted.cli("push", simple_name, simple_url, "--protocol", "simple", workspace=a)
    encrypted.cli("pull", simple_url, "--protocol", "simple", workspace=c)
    encrypted.cli("pull", url, "--protocol", "simple", workspace=c)
    with open_dataset(a, name) as mine, open_dataset(c, name) as theirs:
        pd.testing.assert_frame_equal(mine.to_pandas(), theirs.to_pandas())

    stored = encrypted.encryption_of_every_object()
    assert all(any(f"/{each}/data/" in key for key in stored) for each in (name, big_name, simple_name))
    assert {key: sse for key, sse in stored.items() if sse != "aws:kms"} == {}

    # Delta Sharing's own client reads the encrypted slices from presigned URLs
    profile = tmp_path / "reader.share"
    made = run_cli(
        "token", "profile", "reader", "--tokens", str(encrypted.tokens), "--url", encrypted.server.url,
        "--read", name, "-o", str(profile),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    shared = delta_sharing.load_as_pandas(f"{profile}#{SHARE}.{SCHEMA}.{name}")
    with open_dataset(b, name) as theirs:
        pd.testing.assert_frame_equal(shared, theirs.to_pandas())

    # the web view's downloads: a slice's Parquet by redirect to the store, records as CSV
    with open_dataset(b, name) as theirs:
        first = theirs.to_pandas().head(30).reset_index(drop=True)
        slice_hash = str(theirs.slices()[0].ref.physical_hash)
    with httpx.Client(cookies=encrypted.cookies(), follow_redirects=True) as web:
        parquet = web.get(f"{encrypted.server.url}/ui/datasets/{name}/slices/{slice_hash}/parquet")
        assert parquet.status_code == 200, parquet.text[:300]
        assert list(pq.read_table(io.BytesIO(parquet.content)).column("offset").to_pylist()) == list(range(30))
        csv = web.get(f"{encrypted.server.url}/ui/datasets/{name}/csv", params={"last": "5"})
        assert csv.status_code == 200 and csv.text.count("\n") >= 5
    assert list(first["offset"]) == list(range(30))


def test_a_put_without_the_signed_encryption_headers_is_refused_by_the_store(encrypted: Encrypted) -> None:
    store = S3Store(
        encrypted.s3.bucket, encrypted.prefix, endpoint_url=encrypted.s3.endpoint, sse="aws:kms", sse_kms_key_id=KMS_KEY
    )
    try:
        signed = store.presign_put("loose/object", 60)
        assert signed.headers == {
            "x-amz-server-side-encryption": "aws:kms",
            "x-amz-server-side-encryption-aws-kms-key-id": KMS_KEY,
        }
        assert httpx.put(signed.url, content=b"plain").status_code == 403
        assert httpx.put(signed.url, content=b"plain", headers=dict(signed.headers)).status_code == 200
        info = store.head("loose/object")
        assert info is not None and info.opaque_etag  # the store reports SSE-KMS: its ETag confirms nothing
    finally:
        store.delete("loose/object")
        store.close()
