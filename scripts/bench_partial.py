"""`make bench` case (r): a reader pays for what it needs (issue 45), on the bench's S3 server.

(a) A keyed dataset of 10 ingests that each change every row: each adds a data slice (the changed
rows, ``SLICE_BYTES``) and a checkpoint of ``CHECKPOINT_FILES`` new files (``CHECKPOINT_BYTES`` in
all, no file shared with another checkpoint: what `ingest --primary-key` makes when every row changes).
They are made through the checkpoint API as ingest commits them after its Spark job (random bytes: the
figures are bytes moved, and Spark's time is not what is measured). A fresh pull with
`--all-checkpoints` (what every pull moved before), a default one, and `--state-only`: bytes moved
(exact) and seconds (indicative on a shared machine).

(b) An append dataset of 1,000 slices of ``APPEND_BYTES`` (one record each), committed in three
batches (900, 90, 10 blocks) so the blocks' system times have two boundaries: `--last 10` (1% of the
records), `--since` the last batch's time (1% of the blocks), each against a full pull; then widening
to 10% (`--last 100`, `--since` the middle batch's time) on the 1% workspaces: only the difference
moves."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from smart_transfer.model import AddData, DataSlice, Multihash, ObjectKind, ObjectRef, OffsetInterval
from smart_transfer.repo import Workspace
from tests.scale import commit_checkpoint, grow

INGESTS = 10
CHECKPOINT_FILES = 20
CHECKPOINT_BYTES = 20 * 2**20
SLICE_BYTES = 2 * 2**20
ROWS = 200_000
APPEND_BATCHES = (900, 90, 10)
APPEND_BYTES = 64 * 1024

Record = Callable[..., None]


def _cli(cli: Sequence[str], env: dict[str, str], *args: str) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    done = subprocess.run([*cli, *args, "--json"], capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])}: {done.stderr.strip()}")
    return seconds, json.loads(done.stdout)


def _keyed(workspace: Path, name: str, scratch: Path) -> int:
    """The keyed dataset (see the module docstring); returns the latest checkpoint's bytes."""
    latest = 0
    with Workspace(workspace) as opened:
        dataset = opened.dataset(name)
        for ingest in range(INGESTS):
            data = os.urandom(SLICE_BYTES)
            digest = Multihash.of(data)
            opened.store.put(dataset.object_key(ObjectRef(ObjectKind.DATA, digest, len(data))), data)
            interval = OffsetInterval(ingest * ROWS, (ingest + 1) * ROWS - 1)
            dataset.append([AddData(new_data=DataSlice(digest, len(data), interval, ROWS))])
            directory = scratch / f"ckpt-{ingest}"
            directory.mkdir(parents=True)
            for number in range(CHECKPOINT_FILES):
                (directory / f"{ingest * 1000 + number:06d}.sst").write_bytes(
                    os.urandom(CHECKPOINT_BYTES // CHECKPOINT_FILES)
                )
            (directory / "CURRENT").write_bytes(b"MANIFEST-000005\n")
            stored = commit_checkpoint(opened, name, directory)
            latest = sum(item.size for item in stored.manifest.files)
            shutil.rmtree(directory)
    return latest


def _pull(cli: Sequence[str], env: dict[str, str], workspace: Path, *args: str) -> dict[str, Any]:
    seconds, summary = _cli(cli, env, "pull", *args, "--workspace", str(workspace))
    return {"bytes": summary["bytes_transferred"], "objects": summary["objects_transferred"], "s": round(seconds, 2)}


def partial_case(
    cli: Sequence[str], env: dict[str, str], work: Path, url: str, record: Record, extra: dict[str, Any]
) -> None:
    """Run case (r) against the bench's S3 server at ``url``."""
    print("case r: a reader pays for what it needs: checkpoints, state only, part of the slices")
    root = work / "partial"
    results: dict[str, Any] = {}
    source = root / "keyed"
    latest = _keyed(source, "keyed", root / "scratch")
    _cli(cli, env, "push", "keyed", f"{url}/keyed", "--workspace", str(source))
    keyed = {"latest_checkpoint_bytes": latest, "slice_bytes": SLICE_BYTES * INGESTS}
    kinds = (("before (--all-checkpoints)", ["--all-checkpoints"]), ("default", []), ("state only", ["--state-only"]))
    for label, flags in kinds:
        keyed[label] = _pull(cli, env, root / f"keyed-{len(keyed)}", f"{url}/keyed", *flags)
        record(f"r keyed {label}", "smart pull", keyed[label]["s"])
    results["keyed"] = keyed

    append = root / "append"
    for batch in APPEND_BATCHES:
        grow(append, "append", batch, APPEND_BYTES)
    _cli(cli, env, "push", "append", f"{url}/append", "--workspace", str(append))
    times = _times(cli, env, append)
    blocks = sum(APPEND_BATCHES)  # the last batch's first block and the middle one's: 1% and 10% of them
    remote = f"{url}/append"
    appended: dict[str, Any] = {"full": _pull(cli, env, root / "append-full", remote)}
    appended["last 1%"] = _pull(cli, env, root / "append-last", remote, "--last", "10")
    appended["since 1%"] = _pull(cli, env, root / "append-since", remote, "--since", times[blocks - 9])
    appended["last 1% -> 10%"] = _pull(cli, env, root / "append-last", remote, "--last", "100")
    appended["since 1% -> 10%"] = _pull(cli, env, root / "append-since", remote, "--since", times[blocks - 99])
    for label, found in appended.items():
        record(f"r append {label}", "smart pull", found["s"])
    results["append"] = appended
    extra["r_partial"] = results
    shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(results, indent=2))


def _times(cli: Sequence[str], env: dict[str, str], workspace: Path) -> dict[int, str]:
    """The system time of each block, by sequence number."""
    done = subprocess.run(
        [*cli, "log", "append", "--json", "--workspace", str(workspace)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return {block["sequence_number"]: block["system_time"] for block in map(json.loads, done.stdout.splitlines())}
