"""What the fault runs share: a private S3 instance, whose gateway they may stop or pause without
disturbing the shared one other tests (and other people) use."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import ROOT, S3Env, _free_port_pair


@pytest.fixture(scope="session")
def private_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[S3Env, Path]]:
    """A second S3 instance of our own, so its outages and stalls disturb nothing else."""
    directory = tmp_path_factory.mktemp("s3-faults")
    port = _free_port_pair()
    script = str(ROOT / "scripts" / "s3-local.sh")
    result = subprocess.run(
        ["bash", script, "start", str(directory), str(port)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    env = dict(re.findall(r"^export (\w+)=(.*)$", result.stdout, re.M))
    yield S3Env(env["SMART_TRANSFER_TEST_S3_ENDPOINT"], env["SMART_TRANSFER_TEST_S3_BUCKET"], env), directory
    subprocess.run(["bash", script, "stop", str(directory)], check=False)


@contextmanager
def gateway_paused(directory: Path) -> Iterator[None]:
    """The private S3 gateway stopped by SIGSTOP (it accepts connections and answers nothing) for the
    duration of the block, then resumed by SIGCONT whatever happens."""
    pid = int((directory / "run" / "client.rgw.a.pid").read_text().strip())
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)
