"""`make bench` case (r): a reader pays for what it needs (issue 45), on the bench's S3 server.

(a) A keyed dataset made by the real pipeline: `smart-transfer ingest --primary-key id` of a CSV of
``KEYED_ROWS`` rows, ``INGESTS`` times, each run with the same ids and new values in every row, so each
adds a data slice of every row and a RocksDB checkpoint of about 20 MB (200,000 rows; the figure the
issue names) that shares almost no file with the one before. Each ingest's seconds are recorded. A fresh
pull with `--all-checkpoints` (what every pull moved before), a default one, and `--state-only`: objects
and bytes moved (exact), seconds (indicative on a shared machine), and the metadata each pull stored
(blocks, checkpoint manifests and their pages: the workspace's store for the dataset less the objects
moved), against the latest checkpoint's bytes and the data's: the issue's goals are default <= data +
1.1x the latest checkpoint, state-only <= 1.1x the latest checkpoint + the metadata.

(b) An append dataset of 1,000 slices of ``APPEND_BYTES`` (one record each), committed in three
batches (900, 90, 10 blocks) so the blocks' system times have two boundaries: `--last 10` (1% of the
records), `--since` the last batch's time (1% of the blocks), each against a full pull; then widening
to 10% (`--last 100`, `--since` the middle batch's time) on the 1% workspaces: only the difference
moves."""

from __future__ import annotations

import csv
import json
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from smart_transfer.model import Multihash, ObjectKind, ObjectRef
from smart_transfer.repo import Workspace
from smart_transfer.repo.repository import STORE_DIR
from tests.scale import grow

INGESTS = 10
#: Rows of the keyed dataset: 200,000 make checkpoints of about 20 MB (19.2 MiB measured), the issue's size.
KEYED_ROWS = 200_000
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


def _write_rows(path: Path, rows: int, run: int) -> Path:
    """Order-like rows ``0..rows-1`` by id; ``run`` seeds the values and is in every row's note, so each
    run changes every row (a random value alone may repeat the previous run's) and keys stay the same."""
    generator = random.Random(run)
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["id", "customer", "amount", "note"])
        for key in range(rows):
            writer.writerow([key, f"c{generator.randrange(100_000)}", generator.randrange(1, 1_000_000), f"run {run}"])
    return path


def _keyed(
    cli: Sequence[str], env: dict[str, str], workspace: Path, name: str, scratch: Path, rows: int, record: Record
) -> dict[str, Any]:
    """The keyed dataset (see the module docstring), ingested by the CLI; returns its figures."""
    scratch.mkdir(parents=True, exist_ok=True)
    ingests = []
    for run in range(INGESTS):
        source = _write_rows(scratch / f"rows-{run}.csv", rows, run)
        args = ["ingest", name, "--input", str(source), "--primary-key", "id", "--workspace", str(workspace)]
        seconds, summary = _cli(cli, env, *args)
        source.unlink()
        if summary["rows_added"] != rows:  # the case is about runs that change every row
            raise RuntimeError(f"ingest {run}: {summary['rows_added']} of {rows} rows added")
        record("r keyed ingest", f"ingest {rows:,} rows", seconds)
        ingests.append({"s": round(seconds, 1), "checkpoint_bytes_stored": summary["checkpoint_bytes_stored"]})
    return {"rows": rows, "ingests": ingests, **_chain_figures(cli, env, workspace, name)}


def _chain_figures(cli: Sequence[str], env: dict[str, str], workspace: Path, name: str) -> dict[str, Any]:
    """The data's bytes, the latest checkpoint's files and bytes, and what of them older checkpoints
    hold too (real RocksDB checkpoints may share files: a pull of the latest moves those as well)."""
    done = subprocess.run(
        [*cli, "log", name, "--json", "--workspace", str(workspace)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    blocks = sorted(map(json.loads, done.stdout.splitlines()), key=lambda block: block["sequence_number"])
    data_bytes = sum(block["new_data"]["size"] for block in blocks if "new_data" in block)
    manifests = [block["new_checkpoint"] for block in blocks if "new_checkpoint" in block]
    with Workspace(workspace, read_only=True) as opened:
        dataset = opened.dataset(name)
        files = [
            {item.physical_hash: item.size for item in dataset.read_manifest(_ref(manifest)).files}
            for manifest in manifests
        ]
    *older, latest = files
    seen_before = {digest for checkpoint in older for digest in checkpoint}
    shared = {digest: size for digest, size in latest.items() if digest in seen_before}
    every = {digest: size for checkpoint in files for digest, size in checkpoint.items()}
    return {
        "data_bytes": data_bytes,
        "checkpoints": len(files),
        "latest_checkpoint_files": len(latest),
        "latest_checkpoint_bytes": sum(latest.values()),
        "latest_shared_with_older_files": len(shared),
        "latest_shared_with_older_bytes": sum(shared.values()),
        "all_checkpoints_distinct_files": len(every),
        "all_checkpoints_distinct_bytes": sum(every.values()),
    }


def _ref(checkpoint: dict[str, Any]) -> ObjectRef:
    return ObjectRef(ObjectKind.CHECKPOINT, Multihash.parse(checkpoint["physical_hash"]), checkpoint["size"])


def _pull(cli: Sequence[str], env: dict[str, str], workspace: Path, *args: str) -> dict[str, Any]:
    """One pull into ``workspace``: objects and bytes moved, seconds, and, for a fresh workspace, the
    metadata bytes it stored."""
    fresh = not workspace.exists()
    seconds, summary = _cli(cli, env, "pull", *args, "--workspace", str(workspace))
    moved = {"objects": summary["objects_transferred"], "bytes": summary["bytes_transferred"], "s": round(seconds, 2)}
    if not fresh:  # the store holds what earlier pulls moved too: its size less this move is not metadata
        return moved
    # What else a fresh pull stores is metadata: blocks, checkpoint manifests and their pages (the head
    # ref, a few dozen bytes, is counted with them)
    stored = sum(
        path.stat().st_size for path in (workspace / STORE_DIR / summary["dataset"]).rglob("*") if path.is_file()
    )
    return {**moved, "metadata_bytes": stored - moved["bytes"]}


def partial_case(
    cli: Sequence[str],
    env: dict[str, str],
    work: Path,
    url: str,
    record: Record,
    extra: dict[str, Any],
    rows: int = KEYED_ROWS,
) -> None:
    """Run case (r) against the bench's S3 server at ``url``, with ``rows`` rows in the keyed dataset."""
    print("case r: a reader pays for what it needs: checkpoints, state only, part of the slices")
    root = work / "partial"
    results: dict[str, Any] = {}
    source = root / "keyed"
    keyed = _keyed(cli, env, source, "keyed", root / "scratch", rows, record)
    _cli(cli, env, "push", "keyed", f"{url}/keyed", "--workspace", str(source))
    kinds = (("before (--all-checkpoints)", ["--all-checkpoints"]), ("default", []), ("state only", ["--state-only"]))
    for number, (label, flags) in enumerate(kinds):
        keyed[label] = _pull(cli, env, root / f"keyed-{number}", f"{url}/keyed", *flags)
        record(f"r keyed {label}", "smart pull", keyed[label]["s"])
    latest, default, state = keyed["latest_checkpoint_bytes"], keyed["default"], keyed["state only"]
    # the goals: default <= data + 1.1x latest; state only <= 1.1x latest + metadata
    keyed["default_checkpoint_x_latest"] = round((default["bytes"] - keyed["data_bytes"]) / latest, 3)
    keyed["state_only_x_latest"] = round(state["bytes"] / latest, 3)
    keyed["before_x_default"] = round(keyed["before (--all-checkpoints)"]["bytes"] / default["bytes"], 2)
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
