"""The tutorial (docs/tutorial.md) is executed: its blocks, in order, as one shell script against a real
server on the local S3, so the page cannot describe commands that no longer work."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, S3Env, free_port
from tests.docs.blocks import code_blocks

TUTORIAL = ROOT / "docs" / "tutorial.md"
#: Bound on the whole tutorial (a Spark ingest, a server start, a push, a pull, two reads): about a minute
#: on a quiet 2-core machine; the JVM's start alone takes minutes when the machine is loaded.
TUTORIAL_SECONDS = 540
#: The one block the test does not run, and why: it installs and starts what the test environment has.
SETUP_NOTE = "tutorial: setup (the test runs in the installed environment, on the shared local S3)"


def tutorial_script(port: int, prefix: str) -> str:
    """The tutorial's blocks as one bash script: shell blocks as they are, Python blocks fed to this
    interpreter; the port and S3 prefix are this test's own."""
    lines = ["set -euo pipefail"]
    for block in code_blocks(TUTORIAL):
        if block.note == SETUP_NOTE:
            continue
        body = block.body.replace("127.0.0.1:8080", f"127.0.0.1:{port}").replace("--port 8080", f"--port {port}")
        body = body.replace("--s3-prefix tutorial", f"--s3-prefix {prefix}")
        if block.lang == "sh":
            lines.append(body)
        elif block.lang == "python":
            lines.append(f"\"{sys.executable}\" - <<'TUTORIAL_PY'\n{body}\nTUTORIAL_PY")
        else:
            raise AssertionError(f"the tutorial has a {block.lang!r} block the test cannot run")
    return "\n".join(lines) + "\n"


def test_the_tutorial_runs_green(s3_env: S3Env, tmp_path: Path) -> None:
    blocks = code_blocks(TUTORIAL)
    assert [b.note for b in blocks if b.note] == [SETUP_NOTE], "only the setup block may be left out"
    port, prefix = free_port(), f"t-{secrets.token_hex(6)}"
    script = tmp_path / "tutorial.sh"
    script.write_text(tutorial_script(port, prefix))
    env = {**os.environ, **s3_env.env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    # a step that dies of a signal prints every thread's Python stack into the transcript first
    env["PYTHONFAULTHANDLER"] = "1"
    env.pop("SMART_TRANSFER_TOKEN", None)
    transcript = tmp_path / "output.txt"
    with transcript.open("w") as out:
        process = subprocess.Popen(
            ["bash", "-x", str(script)],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            process.wait(timeout=TUTORIAL_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        finally:
            with contextlib.suppress(ProcessLookupError):  # the server the tutorial started in the background
                os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=10)
    output = transcript.read_text()
    log = tmp_path / "tutorial" / "server.log"
    context = output[-4000:] + (log.read_text()[-2000:] if log.exists() else "")
    assert process.returncode == 0, context
    expected = [
        "pushed",
        "pulled",
        "up to date with the remote",
        "total: 53.74",
        f"smart-transfer pull http://127.0.0.1:{port}/orders",
    ]
    for text in expected:
        assert text in output, f"{text!r} not in the tutorial's output:\n{context}"
    # tail, pandas and the Delta Sharing client each print order 4's row
    assert output.count("linus") >= 3, context


pytestmark = [pytest.mark.s3, pytest.mark.timeout(TUTORIAL_SECONDS + 60)]
