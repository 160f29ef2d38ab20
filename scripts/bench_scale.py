"""`make bench` case (z): what a small change costs as the dataset grows, on the local S3 and on the
embedded store. For datasets of 1,000, 10,000 and 100,000 objects (one block each), pushed once: a push
of 25 new objects, then a pull of one new block into a copy of the pushing workspace. For each: wall
time, the server's storage requests by kind (its /metrics: every call to its store, named by S3
operation on both stores; on S3 a ref read's one-key listing is counted apart as LIST ref) and the
metadata bytes of the session (its frames: messages and block tarballs). Then a checkpoint of 20,000
files and a 10-row change to it (10 new SST files and RocksDB's MANIFEST), pushed and pulled. The
figures should be flat in the dataset's size."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from smart_transfer.repo import Workspace
from tests.scale import (
    RUNTIME_FILES,
    commit_checkpoint,
    grow,
    sst_names,
    ten_rows_changed,
    write_checkpoint,
)

#: Objects each dataset holds before the change, and what one change adds.
SIZES = (1_000, 10_000, 100_000)
CHANGE = 25
#: Files of the checkpoint the last part of the case changes by 10 rows.
CHECKPOINT_FILES = 20_000
#: How the table names the store operations.
KINDS = {
    "ListObjectsV2": "LIST",
    "ListObjectsV2.ref": "LIST ref",
    "HeadObject": "HEAD",
    "GetObject": "GET",
    "PutObject": "PUT",
}

Record = Callable[..., None]


def _metrics(url: str) -> Counter[str]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
        text = response.read().decode()
    counts: Counter[str] = Counter()
    for operation, value in re.findall(
        r'^smart_transfer_store_seconds_count\{operation="([\w.]+)"\} (\S+)$', text, re.M
    ):
        counts[KINDS.get(operation, operation)] += int(float(value))
    for value in re.findall(r"^smart_transfer_session_bytes_total\{[^}]*\} (\S+)$", text, re.M):
        counts["metadata bytes"] += int(float(value))
    return counts


def _cli(cli: Sequence[str], env: dict[str, str], *args: str) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    done = subprocess.run([*cli, *args, "--json"], capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])}: {done.stderr.strip()}")
    return seconds, json.loads(done.stdout)


def _counted(url: str, cli: Sequence[str], env: dict[str, str], *args: str) -> tuple[float, Counter[str]]:
    before = _metrics(url)
    seconds, _ = _cli(cli, env, *args)
    return seconds, _metrics(url) - before


def _local_server(cli: Sequence[str], env: dict[str, str], root: Path) -> tuple[subprocess.Popen[str], str]:
    """A server on the embedded store (a free port; the bench's own server is on S3)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [*cli, "serve", "--host", "127.0.0.1", "--port", str(port), "--root", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    match = re.search(r"(http://127\.0\.0\.1:\d+)", process.stdout.readline())
    if match is None:
        process.kill()
        raise RuntimeError("the embedded-store server did not start")
    return process, match.group(1)


def _one_size(
    cli: Sequence[str], env: dict[str, str], work: Path, store: str, url: str, size: int, built: Path
) -> dict[str, Any]:
    name = f"scale-{size}"
    pusher, puller = work / f"scale-{store}-{size}-push", work / f"scale-{store}-{size}-pull"
    shutil.copytree(built, pusher)
    remote = f"{url}/{name}-{store}"
    setup, _ = _cli(cli, env, "push", name, remote, "--workspace", str(pusher))
    grow(pusher, name, CHANGE)
    push_s, push_calls = _counted(url, cli, env, "push", name, remote, "--workspace", str(pusher))
    shutil.copytree(pusher, puller)
    grow(pusher, name, 1)
    _cli(cli, env, "push", name, remote, "--workspace", str(pusher))
    pull_s, pull_calls = _counted(url, cli, env, "pull", name, "--workspace", str(puller))  # from its remote
    shutil.rmtree(pusher)
    shutil.rmtree(puller)
    return {
        "setup_push_s": round(setup, 2),
        "push_s": round(push_s, 3),
        "push": dict(push_calls),
        "pull_s": round(pull_s, 3),
        "pull": dict(pull_calls),
    }


def _checkpoint(cli: Sequence[str], env: dict[str, str], work: Path, store: str, url: str) -> dict[str, Any]:
    """A checkpoint of CHECKPOINT_FILES files pushed and pulled, then a 10-row change to it (10 new SST
    files and RocksDB's MANIFEST) pushed and pulled: the change's costs."""
    name, root = "scale-checkpoint", work / f"scale-{store}-checkpoint"
    pusher, puller, remote = root / "push", root / "pull", f"{url}/scale-checkpoint-{store}"
    names = sorted([*sst_names(CHECKPOINT_FILES - len(RUNTIME_FILES)), *RUNTIME_FILES])
    with Workspace(pusher) as opened:
        commit_checkpoint(opened, name, write_checkpoint(root / "c1", names, "1"))
    setup, _ = _cli(cli, env, "push", name, remote, "--workspace", str(pusher))
    _cli(cli, env, "pull", remote, "--as", name, "--workspace", str(puller))
    with Workspace(pusher) as opened:
        changed = commit_checkpoint(opened, name, write_checkpoint(root / "c2", ten_rows_changed(names), "2"))
    push_s, push_calls = _counted(url, cli, env, "push", name, remote, "--workspace", str(pusher))
    pull_s, pull_calls = _counted(url, cli, env, "pull", name, "--workspace", str(puller))
    shutil.rmtree(root)
    return {
        "setup_push_s": round(setup, 2),
        "changed_files": changed.files,
        "changed_pages": changed.pages,
        "push_s": round(push_s, 3),
        "push": dict(push_calls),
        "pull_s": round(pull_s, 3),
        "pull": dict(pull_calls),
    }


def scale_case(
    cli: Sequence[str],
    env: dict[str, str],
    work: Path,
    s3_url: str,
    record: Record,
    extra: dict[str, Any],
    sizes: Sequence[int] = SIZES,
) -> None:
    """Run case (z) against the bench's S3 server and a server of its own on the embedded store."""
    print(f"case z: a {CHANGE}-object push and a 1-block pull onto datasets of {', '.join(map(str, sizes))} objects")
    local, local_url = _local_server(cli, env, work / "scale-local-server")
    results: dict[str, dict[str, Any]] = {}
    try:
        for size in sizes:
            built = work / f"scale-built-{size}"
            grow(built, f"scale-{size}", size)
            for store, url in (("s3", s3_url), ("local", local_url)):
                found = _one_size(cli, env, work, store, url, size, built)
                results[f"{store} {size}"] = found
                record(f"z {store} {size // 1000}k push+{CHANGE}", "smart push", found["push_s"])
                record(f"z {store} {size // 1000}k pull+1", "smart pull", found["pull_s"])
            shutil.rmtree(built)
        for store, url in (("s3", s3_url), ("local", local_url)):
            found = _checkpoint(cli, env, work, store, url)
            results[f"{store} ckpt {CHECKPOINT_FILES // 1000}k"] = found
            record(f"z {store} ckpt 20k 10 rows", "smart push", found["push_s"])
            record(f"z {store} ckpt 20k pull", "smart pull", found["pull_s"])
    finally:
        local.terminate()
        local.wait(30)
    extra["z_scale"] = results
    _print(results)


def _print(results: dict[str, dict[str, Any]]) -> None:
    columns = ["LIST", "LIST ref", "HEAD", "GET", "PUT", "metadata bytes"]
    print(f"\n{'store objects':<14} {'op':<10} {'seconds':>8} " + " ".join(f"{c:>9}" for c in columns))
    for where, found in results.items():
        for op in ("push", "pull"):
            calls = found[op]
            cells = " ".join(f"{calls.get(c, 0):>9}" for c in columns)
            print(f"{where:<14} {op:<10} {found[op + '_s']:>8} {cells}")
