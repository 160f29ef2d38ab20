"""Delta Sharing on big tables, and the readers side by side, in one run (issue 31):

- tables of 1,000, 10,000 and 100,000 slices (built straight into a server root, no Spark: 4-row Parquet
  slices, 1,000 distinct objects cycled, so a 100,000-slice table is built in seconds; each file still
  gets its own line, statistics lookup and presigned URL): a query's first-line time (the protocol
  line) and whole-answer time, cold (the server's first: the chain is read and the footers of the
  distinct slices) and warm, in the parquet and delta formats; the changes of the last version (a
  1-slice change) and the same as a query with ``startingVersion``; the server's peak RSS (VmHWM), one
  fresh server per size;
- the cost of a slice's statistics: its footer read and parsed (two ranged reads), on the embedded store
  and on the local S3, and the read of the record the index keeps;
- 1,000,000 rows in 20 slices on the local S3: ``load_as_pandas`` in both formats against ``pull`` +
  ``to_pandas()`` (bench_sharing.py's case (h)).

    source /work/wt/s3-env.sh   # or eval "$(scripts/s3-local.sh env DIR PORT)"
    PYTHONPATH=$PWD .venv/bin/python scripts/bench_sharing_tables.py [--sizes 1000,10000,100000] [--reps 5]

Prints medians and writes bench-results/sharing/tables.json."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
from bench_sharing import NAME as SHARING_NAME
from bench_sharing import sharing_case
from bench_ui import CLI, serve

from smart_transfer.model import AddData, DatasetName, DataSlice, Multihash, ObjectKind, decode_block
from smart_transfer.model.events import OffsetInterval
from smart_transfer.repo import Repository
from smart_transfer.repo.footer import slice_footer
from smart_transfer.repo.footer_stats import footer_stats, stats_from_bytes, stats_to_bytes
from smart_transfer.repo.layout import object_key
from smart_transfer.storage.local import LocalStore
from smart_transfer.storage.s3 import S3Store

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench-results" / "sharing"
NAME = "big"
ROWS = 4
DISTINCT = 1000
TABLE = f"/delta-sharing/shares/smart-transfer/schemas/datasets/tables/{NAME}"
DELTA = {"delta-sharing-capabilities": "responseformat=delta"}


def _slices(count: int) -> list[bytes]:
    """``count`` distinct small Parquet files (an offset and an amount)."""
    found = []
    for index in range(count):
        sink = pa.BufferOutputStream()
        offsets = pa.array(range(index * ROWS, (index + 1) * ROWS), pa.int64())
        pq.write_table(pa.table({"offset": offsets, "amount": pa.array([index] * ROWS, pa.int64())}), sink)
        found.append(bytes(sink.getvalue()))
    return found


def build(root: Path, files: int, objects: list[bytes]) -> None:
    """A server root whose dataset ``NAME`` has ``files`` blocks, each adding one of ``objects`` in turn."""
    with Repository(LocalStore(root / "store"), root / "index") as repository:
        hashes = [Multihash.of(data) for data in objects]
        for data, digest in zip(objects, hashes, strict=True):
            repository.store.put(object_key(DatasetName(NAME), ObjectKind.DATA, digest), data)
        events = []
        for index in range(files):
            data, interval = objects[index % len(objects)], OffsetInterval(index * ROWS, index * ROWS + ROWS - 1)
            events.append(AddData(new_data=DataSlice(hashes[index % len(objects)], len(data), interval, ROWS)))
        repository.dataset(NAME).append(events)


def footer_cost(repository: Repository, name: str, reps: int) -> dict[str, float]:
    """Milliseconds per slice (median of ``reps`` passes over the dataset's distinct slices): the footer
    read and turned into statistics, and the stored record read back."""
    dataset = repository.dataset(name)
    pieces = {}
    for _, data in dataset.blocks_after(dataset.require_tip(), None):
        event = decode_block(data).event
        if isinstance(event, AddData) and event.new_data is not None:
            pieces[str(event.new_data.physical_hash)] = event.new_data
    chosen = list(pieces.values())[:DISTINCT]
    footers, records = [], []
    for _ in range(reps):
        started = time.perf_counter()
        stored = [stats_to_bytes(footer_stats(slice_footer(dataset, piece))) for piece in chosen]
        footers.append((time.perf_counter() - started) * 1000 / len(chosen))
        started = time.perf_counter()
        for raw in stored:
            stats_from_bytes(raw)
        records.append((time.perf_counter() - started) * 1000 / len(chosen))
    return {"slices": len(chosen), "footer_ms": statistics.median(footers), "record_ms": statistics.median(records)}


def timed_lines(method: str, url: str, body: dict[str, Any] | None, headers: dict[str, str]) -> dict[str, float]:
    """Seconds to the first line and to the last, and the lines."""
    started = time.perf_counter()
    with httpx.stream(method, url, json=body, headers=headers, timeout=1800) as answer:
        answer.raise_for_status()
        lines = answer.iter_lines()
        next(lines)
        first = time.perf_counter() - started
        count = 1 + sum(1 for _ in lines)
    return {"first_s": first, "total_s": time.perf_counter() - started, "lines": count}


def memory_kib(pid: int) -> dict[str, int]:
    """The process's resident and peak resident memory (KiB)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {"rss": int(fields["VmRSS"].split()[0]), "peak": int(fields["VmHWM"].split()[0])}


def _medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def table_case(work: Path, files: int, objects: list[bytes], reps: int) -> dict[str, Any]:
    """One size: build, serve, measure (see the module's text)."""
    root = work / f"server-{files}"
    started = time.perf_counter()
    build(root, files, objects)
    figures: dict[str, Any] = {"files": files, "build_s": time.perf_counter() - started}
    process, url = serve(root, False)
    try:
        figures["rss_started_mib"] = memory_kib(process.pid)["rss"] / 1024
        query = f"{url}{TABLE}/query"
        figures["cold"] = timed_lines("POST", query, {}, {})
        runs: dict[str, Callable[[], dict[str, float]]] = {
            # the floor: the smallest answer (on a loaded machine, most of every figure below)
            "list shares": lambda: timed_lines("GET", f"{url}/delta-sharing/shares", None, {}),
            "warm parquet": lambda: timed_lines("POST", query, {}, {}),
            "warm delta": lambda: timed_lines("POST", query, {}, DELTA),
            "changes of the last version": lambda: timed_lines(
                "GET", f"{url}{TABLE}/changes?startingVersion={files}", None, {}
            ),
            "query from the last version": lambda: timed_lines("POST", query, {"startingVersion": files}, {}),
        }
        for label, run in runs.items():
            figures[label] = _medians([run() for _ in range(reps)])
        memory = memory_kib(process.pid)
        figures["rss_end_mib"], figures["peak_rss_mib"] = memory["rss"] / 1024, memory["peak"] / 1024
    finally:
        process.terminate()
        process.wait(30)
    print(json.dumps(figures), flush=True)
    return figures


def readers_case(work: Path) -> dict[str, Any]:
    """Case (h) against a fresh server on the local S3, and the footer cost there."""
    endpoint, bucket = os.environ["SMART_TRANSFER_TEST_S3_ENDPOINT"], os.environ["SMART_TRANSFER_TEST_S3_BUCKET"]
    prefix = f"bench-sharing-{secrets.token_hex(6)}"
    process, url = serve(
        work / "s3-server", False, ["--s3-endpoint", endpoint, "--s3-bucket", bucket, "--s3-prefix", prefix]
    )
    times: dict[str, list[float]] = {}
    extra: dict[str, Any] = {}
    try:
        record = lambda case, reader, seconds: times.setdefault(reader, []).append(seconds)  # noqa: E731
        sharing_case(CLI, dict(os.environ), work, url, record, extra)
    finally:
        process.terminate()
        process.wait(30)
    store = S3Store(bucket, prefix, endpoint_url=endpoint)
    with Repository(store, work / "s3-index") as repository:
        cost = footer_cost(repository, SHARING_NAME, 3)
    return {
        "seconds_median": {reader: statistics.median(values) for reader, values in times.items()},
        "seconds": times,
        "peak_rss_mib": extra.get("h_peak_rss_mib"),
        "s3_footer": cost,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--skip-readers", action="store_true", help="no 1M-row readers case (it needs the S3)")
    args = parser.parse_args()
    report: dict[str, Any] = {"cpus": os.cpu_count(), "load": os.getloadavg(), "tables": []}
    with tempfile.TemporaryDirectory(prefix="bench-sharing-") as temp:
        work = Path(temp)
        objects = _slices(DISTINCT)
        for size in (int(text) for text in args.sizes.split(",")):
            report["tables"].append(table_case(work, size, objects, args.reps))
            if "local_footer" not in report:
                # a fresh index, synced from the store's head
                with Repository(LocalStore(work / f"server-{size}" / "store"), work / "cost-index") as repository:
                    report["local_footer"] = footer_cost(repository, NAME, 3)
                print(json.dumps(report["local_footer"]), flush=True)
            subprocess.run(["rm", "-rf", str(work / f"server-{size}")], check=True)
        if not args.skip_readers:
            report["readers"] = readers_case(work)
            print(json.dumps(report["readers"]), flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "tables.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
