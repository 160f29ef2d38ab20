"""``scripts/s3-local.sh env`` is all a tool needs: after one ``eval``, boto3 and s5cmd find the local S3
through the standard variables alone (no endpoint option given)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.conftest import ROOT, S3Env

pytestmark = pytest.mark.s3


def test_the_printed_environment_finds_the_local_s3(s3_env: S3Env, tmp_path: Path) -> None:
    port = str(urlsplit(s3_env.endpoint).port)
    printed = subprocess.run(
        ["bash", str(ROOT / "scripts" / "s3-local.sh"), "env", str(tmp_path), port],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    env = dict(re.findall(r"^export (\w+)=(.*)$", printed, re.M))
    assert env["AWS_ENDPOINT_URL"] == env["S3_ENDPOINT_URL"] == s3_env.endpoint
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3_"))} | env
    listing = f"import boto3; print(boto3.client('s3').list_objects_v2(Bucket={s3_env.bucket!r}, MaxKeys=1)"
    boto = subprocess.run(
        [sys.executable, "-c", listing + "['ResponseMetadata']['HTTPStatusCode'])"],
        capture_output=True,
        text=True,
        env=clean,
        check=False,
    )
    assert boto.stdout.strip() == "200", boto.stderr
    s5cmd = shutil.which("s5cmd", path=str(Path(sys.executable).parent))
    if s5cmd is not None:  # installed with the bench extra
        result = subprocess.run([s5cmd, "ls"], capture_output=True, text=True, env=clean, check=False)
        assert result.returncode == 0 and s3_env.bucket in result.stdout, result.stderr
