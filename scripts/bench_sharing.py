"""`make bench` case (h): a 1,000,000-row dataset in 20 slices on the local S3, read whole with the Delta
Sharing client (`delta_sharing.load_as_pandas`, files straight from S3 by presigned URL) and with
`pull` + `open_dataset(...).to_pandas()` (the SDK). Each read runs in a fresh Python process, timed
from after its imports; its peak RSS is the process's own high-water mark."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: The dataset, and how many times each reader runs (interleaved).
ROWS = 1_000_000
SLICES = 20
RUNS = 3
NAME = "sharing-1m"

#: The reader's own peak RSS: VmHWM starts afresh at exec, where ru_maxrss keeps the parent's high-water mark.
_PEAK = """
import json, re, sys, time
def _peak_kib():
    with open("/proc/self/status") as status:
        return int(re.search(r"VmHWM:\\s+(\\d+)", status.read()).group(1))
"""
_SHARING = (
    _PEAK
    + """
import delta_sharing
started = time.perf_counter()
frame = delta_sharing.load_as_pandas(sys.argv[1])
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "rows": len(frame), "kib": _peak_kib()}))
"""
)
_SHARING_DELTA = _SHARING.replace("load_as_pandas(sys.argv[1])", "load_as_pandas(sys.argv[1], use_delta_format=True)")
_PULL = (
    _PEAK
    + """
from smart_transfer.client import SyncClient, open_dataset
started = time.perf_counter()
with SyncClient(sys.argv[2]) as client:
    client.pull(sys.argv[1])
with open_dataset(sys.argv[2], sys.argv[3]) as dataset:
    frame = dataset.to_pandas()
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "rows": len(frame), "kib": _peak_kib()}))
"""
)


def _slices(directory: Path) -> list[tuple[Path, int]]:
    """The dataset's slices as Parquet files: offset, a customer, an amount, a price and a time."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    per = ROWS // SLICES
    base = pa.scalar(dt.datetime(2026, 1, 1, tzinfo=dt.UTC), pa.timestamp("us", tz="UTC"))
    files = []
    for index in range(SLICES):
        offsets = pa.array(range(index * per, (index + 1) * per), pa.int64())
        table = pa.table(
            {
                "offset": offsets,
                "customer": pc.binary_join_element_wise("c", pc.cast(pc.bit_wise_and(offsets, 65535), pa.string()), ""),
                "amount": pc.multiply(offsets, 7),
                "price": pc.cast(pc.cast(offsets, pa.decimal128(19, 0)), pa.decimal128(21, 2)),
                "at": pc.add(base, pc.cast(pc.multiply(offsets, 1_000_000), pa.duration("us"))),
            }
        )
        path = directory / f"slice-{index:02d}.parquet"
        pq.write_table(table, path)
        files.append((path, per))
    return files


def _read(script: str, args: Sequence[str], env: dict[str, str]) -> dict[str, Any]:
    result = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"a case (h) read failed: {result.stderr[-2000:]}")
    figures: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    if figures["rows"] != ROWS:
        raise RuntimeError(f"a case (h) read got {figures['rows']} rows, not {ROWS}")
    return figures


def sharing_case(
    cli: Sequence[str],
    env: dict[str, str],
    work: Path,
    url: str,
    record: Callable[[str, str, float], None],
    extra: dict[str, Any],
) -> None:
    """Record case (h) against the server at ``url`` (on S3): seconds per read, peak RSS in ``extra``."""
    workspace = work / "ws-sharing"
    for path, rows in _slices(work / "sharing-slices"):
        command = [*cli, "add", NAME, str(path), "--records", str(rows), "--workspace", str(workspace)]
        subprocess.run(command, env=env, check=True, capture_output=True)
    push = [*cli, "push", NAME, f"{url}/{NAME}", "--workspace", str(workspace)]
    subprocess.run(push, env=env, check=True, capture_output=True)
    profile = work / "bench.share"
    # the bench server is anonymous: any bearer token is accepted
    profile.write_text(
        json.dumps({"shareCredentialsVersion": 1, "endpoint": f"{url}/delta-sharing", "bearerToken": "x"})
    )
    table = f"{profile}#smart-transfer.datasets.{NAME}"
    readers = {"load_as_pandas": _SHARING, "load_as_pandas delta format": _SHARING_DELTA, "pull + to_pandas": _PULL}
    peaks: dict[str, list[int]] = {reader: [] for reader in readers}
    for run in range(RUNS):  # interleaved, so a load on the machine weighs on every reader alike
        for reader, script in readers.items():
            pulled = script is _PULL
            args = [f"{url}/{NAME}", str(work / f"ws-sharing-pull-{run}"), NAME] if pulled else [table]
            figures = _read(script, args, env)
            record("h delta sharing 1M", reader, figures["seconds"])
            peaks[reader].append(round(figures["kib"] / 1024))
    extra["h_peak_rss_mib"] = peaks
    print(f"  peak RSS, MiB: {peaks}", flush=True)
