"""What the store-fault tests share: the CLI run under a hard timeout computed from the client's own
bounds (a timeout is a failure that says 'hung' and dumps the process), the one-line error check,
CPU burners, and damage done directly in the bucket."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from smart_transfer.storage.s3 import S3Store
from smart_transfer.transfer.limits import Timeouts
from tests.conftest import CLI, ServerProcess

#: Process start-up (slow under the burners), the session and the server's answers, beyond the
#: transfer bounds the client promises.
MARGIN = 40.0
#: Longest a CPU burner lives, whatever happens to the test that started it.
BURNER_LIFETIME = 1800


@dataclass(frozen=True)
class Bounds:
    """The client's bounds for one run, as flags, and the time the run must end within."""

    connect: float = 1.0
    read: float = 2.0
    attempts: int = 2
    min_rate: int = 256 * 1024

    def flags(self) -> list[str]:
        return [
            "--connect-timeout",
            str(self.connect),
            "--read-timeout",
            str(self.read),
            "--attempts",
            str(self.attempts),
            "--min-rate",
            str(self.min_rate),
        ]

    def hard_timeout(self, largest: int) -> float:
        """Every attempt of the largest object at its bound, the backoff between, and the margin."""
        timeouts = Timeouts(self.connect, self.read, self.attempts, float(self.min_rate))
        return timeouts.stall_bound() + self.attempts * largest / self.min_rate + MARGIN


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    seconds: float


class Hung(AssertionError):
    """A run outlived its bound."""


def run_bounded(args: list[str], workspace: Path, timeout: float) -> Outcome:
    """The CLI as a user runs it; past ``timeout`` it is dumped (py-spy, when installed), killed, and
    the test fails with 'hung'."""
    started = time.monotonic()
    process = subprocess.Popen(
        [*CLI, *args, "--workspace", str(workspace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # SIGABRT then makes the interpreter print every thread's stack on stderr before it dies
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        dump = _dump(process.pid)
        process.send_signal(signal.SIGABRT)
        try:
            out, err = process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate(timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        raise Hung(
            f"hung: {' '.join(args)} ran past its bound of {timeout:.0f} s\n"
            f"stderr: {err[-8000:]}\nstdout: {out[-1000:]}\n{dump}"
        ) from None
    return Outcome(process.returncode, out, err, time.monotonic() - started)


def _dump(pid: int) -> str:
    spy = shutil.which("py-spy")
    if spy is None:
        return "(py-spy not installed: the interpreter's own dump of its threads is in stderr above)"
    result = subprocess.run(
        [spy, "dump", "--pid", str(pid), "--locals"], capture_output=True, text=True, timeout=60, check=False
    )
    return result.stdout[-20000:] + result.stderr[-2000:]


def one_line(outcome: Outcome) -> str:
    """A failed run: non-zero exit, exactly one line on stderr, no traceback."""
    assert outcome.code not in (0, None), f"expected a failure, got success: {outcome.stdout[-500:]}"
    lines = outcome.stderr.strip().splitlines()
    assert "Traceback" not in outcome.stderr and len(lines) == 1, outcome.stderr[-3000:]
    return lines[0]


def server_head(server: ServerProcess, name: str) -> str | None:
    answer = httpx.get(f"{server.url}/{name}/refs/head", timeout=30)
    if answer.status_code == 404:
        return None
    assert answer.status_code == 200, answer.text
    return answer.text.strip()


def local_head(workspace: Path, name: str) -> str | None:
    """The local head (the first line of ``log --json``), None when there is no such dataset."""
    result = subprocess.run(
        [*CLI, "log", name, "--json", "--workspace", str(workspace)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        assert "dataset not found" in result.stderr or "no workspace at" in result.stderr, result.stderr
        return None
    return result.stdout.splitlines()[0]


def verify_clean(workspace: Path, name: str) -> None:
    result = subprocess.run(
        [*CLI, "verify", name, "--workspace", str(workspace)], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


@contextmanager
def cpu_burners(count: int = 2) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` busy loops beside the test, each ending by itself after BURNER_LIFETIME at the latest."""
    code = f"import time\nend = time.monotonic() + {BURNER_LIFETIME}\nwhile time.monotonic() < end: pass"
    burners = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]
    try:
        yield burners
    finally:
        for burner in burners:
            burner.kill()
            burner.wait(10)


def server_store(server: ServerProcess, bucket: str, endpoint: str) -> S3Store:
    """The server's own store (same bucket and prefix), to damage objects behind its back."""
    prefix = next(str(x) for x in server.process.args if str(x).startswith("srv-"))  # type: ignore[union-attr]
    return S3Store(bucket, prefix, endpoint_url=endpoint)


def damage(store: S3Store, key: str, kind: str) -> bytes:
    """Damage one object in the bucket; returns its bytes before, to restore it."""
    original = store.get(key)
    if kind == "overwrite":  # other bytes, same size
        store.put(key, bytes(b ^ 0xFF for b in original[:64]) + original[64:] if original else b"x")
    elif kind == "truncate":
        store.put(key, original[: len(original) // 2])
    elif kind == "delete":
        store.delete(key)
    else:
        raise ValueError(kind)
    return original


def fresh(tmp_path: Path, tag: str) -> Path:
    return tmp_path / f"{tag}-{secrets.token_hex(3)}"
