"""A client that leaves out the signed encryption headers of its upload URLs (the fault proxy drops them
on the way to the real local S3, as a client written without them would): the store refuses every such
PUT with 403, and the CLI says so in one clear line, not as an expired URL; nothing is committed."""

from __future__ import annotations

import secrets
from pathlib import Path

from tests.conftest import S3Env, make_files, run_cli, start_server
from tests.faults.proxy import Proxy, Rule

KMS_KEY = "testkey-1"


def test_an_upload_without_its_encryption_headers_is_told_as_the_stores_refusal(s3_env: S3Env, tmp_path: Path) -> None:
    proxy = Proxy(s3_env.endpoint)
    prefix = f"srv-{secrets.token_hex(6)}"
    server = start_server(
        tmp_path / "server",
        *("--s3-endpoint", proxy.url, "--s3-bucket", s3_env.bucket, "--s3-prefix", prefix),
        *("--s3-sse", "aws:kms", "--s3-sse-kms-key-id", KMS_KEY),
    )
    try:
        proxy.set_rules(Rule("drop_sse", method="PUT", key="/sealed/data/"))
        workspace = tmp_path / "ws"
        added = run_cli("add", "sealed", *map(str, make_files(tmp_path / "in", 2, 1000)), workspace=workspace)
        assert added.returncode == 0, added.stderr
        pushed = run_cli("push", "sealed", f"{server.url}/sealed", workspace=workspace)
        assert pushed.returncode == 1, pushed.stderr
        lines = pushed.stderr.strip().splitlines()
        assert len(lines) == 1, pushed.stderr
        assert "the store refused the upload (HTTP 403" in lines[0]
        assert "not an expired URL" in lines[0] and "server-side encryption" in lines[0]
        assert proxy.hits() >= 1
        assert run_cli("pull", f"{server.url}/sealed", workspace=tmp_path / "other").returncode != 0
    finally:
        server.stop()
        proxy.stop()
