"""How long each page of the web view takes to answer on a dataset with a long chain (100,000 blocks by
default): the datasets list, a dataset's first and last chain pages (cold: the first view of a head
scans the chain once for its schema and its growth chart; then warm), a block's page (a page of its
slice's rows), the comparison of the first and last blocks (cold: one scan of the chain; then
remembered), the CSV downloads (a block's records, the last 1500 records: two slices), and the server
page. The dataset has real Parquet slices at both ends of the chain and watermark-only blocks between,
so the preview reads rows.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_ui.py [--blocks 100000] [--reps 5] [--screenshot] [--s3]

Prints one line per page and records them in bench-results/ui/timings.json (by store); with --screenshot it also saves
the dataset page as seen in headless Chromium to bench-results/ui/readme-dataset.png (the README's)."""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from smart_transfer.model import AddData, DataField, SetDataSchema, SetInfo
from smart_transfer.repo import Workspace

ROOT = Path(__file__).resolve().parent.parent
# the CLI of this checkout (the console script may name a module another checkout has)
CLI = [
    sys.executable,
    "-m",
    "smart_transfer.cli.main",
]
OUT = ROOT / "bench-results" / "ui"
#: Bounds on the server's start and on one page's answer (seconds).
START_TIMEOUT = 60.0
PAGE_TIMEOUT = 60.0
NAME = "sales"
ROWS = 1000


def _slice(directory: Path, start: int) -> Path:
    path = directory / f"slice-{start}.parquet"
    regions = ["north", "south", "east", "west"]
    pq.write_table(
        pa.table(
            {
                "offset": pa.array(range(start, start + ROWS), pa.int64()),
                "region": [regions[i % 4] for i in range(start, start + ROWS)],
                "amount": pa.array([(i * 37) % 1000 for i in range(start, start + ROWS)], pa.int64()),
                "note": [f"order {i}" for i in range(start, start + ROWS)],
            }
        ),
        path,
        row_group_size=250,
    )
    return path


def build(workspace: Path, work: Path, blocks: int) -> None:
    """Seed + slice + schema + info + watermark blocks + slice: ``blocks`` blocks in all."""
    run("add", NAME, str(_slice(work, 0)), "--records", str(ROWS), "--workspace", str(workspace))
    fields = (
        DataField("offset", "BIGINT", False),
        DataField("region", "STRING"),
        DataField("amount", "BIGINT"),
        DataField("note", "STRING"),
    )
    fillers = blocks - 5
    with Workspace(workspace) as opened:
        opened.dataset(NAME).append(
            [
                SetDataSchema(fields),
                SetInfo("Orders by region (a benchmark dataset)", ("bench", "orders")),
                *[AddData(new_watermark="2024-01-01T00:00:00Z")] * fillers,
            ]
        )
    run("add", NAME, str(_slice(work, ROWS)), "--records", str(ROWS), "--workspace", str(workspace))


def run(*args: str) -> str:
    result = subprocess.run([*CLI, *args], capture_output=True, text=True, check=False, timeout=3600)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(args[:2])} failed: {result.stderr}")
    return result.stdout


def store_args(s3: bool) -> list[str]:
    """``serve`` options: the embedded store, or a fresh prefix on the S3 that the test variables name
    (``eval "$(scripts/s3-local.sh env DIR PORT)"``)."""
    if not s3:
        return []
    endpoint, bucket = (
        os.environ.get("SMART_TRANSFER_TEST_S3_ENDPOINT"),
        os.environ.get("SMART_TRANSFER_TEST_S3_BUCKET"),
    )
    if not endpoint or not bucket:
        raise SystemExit("--s3 needs SMART_TRANSFER_TEST_S3_ENDPOINT and _BUCKET (scripts/s3-local.sh env)")
    return ["--s3-endpoint", endpoint, "--s3-bucket", bucket, "--s3-prefix", f"bench-ui-{os.getpid()}-{time.time_ns()}"]


def serve(root: Path, s3: bool, extra: Sequence[str] = ()) -> tuple[subprocess.Popen[str], str]:
    """A server on a free ephemeral port (``serve`` refuses --port 0), with ``extra`` options, and its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [*CLI, "serve", "--host", "127.0.0.1", "--port", str(port), "--root", str(root), *store_args(s3), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    found: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            match = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
            if match and not found:
                found.append(match.group(1))

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + START_TIMEOUT
    while not found and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    if not found:
        process.kill()
        raise SystemExit("the server did not start")
    return process, found[0]


def timed(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=PAGE_TIMEOUT) as answer:
        answer.read()
        assert answer.status == 200, (url, answer.status)
    return time.perf_counter() - started


def measure(base: str, blocks: int, reps: int) -> dict[str, dict[str, float]]:
    pages = {
        "datasets list": f"{base}/ui",
        "dataset, chain page 1": f"{base}/ui/datasets/{NAME}",
        "dataset, last chain page": f"{base}/ui/datasets/{NAME}?page={-(-blocks // 50)}",
        "block, last (its 100 first rows)": f"{base}/ui/datasets/{NAME}/blocks/{blocks - 1}",
        "block, first slice, rows page 3": f"{base}/ui/datasets/{NAME}/blocks/1?page=3",
        "compare first and last blocks": f"{base}/ui/datasets/{NAME}/compare?from=0&to={blocks - 1}",
        "CSV, the last block's records": f"{base}/ui/datasets/{NAME}/blocks/{blocks - 1}/csv",
        "CSV, the last 1500 records": f"{base}/ui/datasets/{NAME}/csv?last=1500",
        "server": f"{base}/ui/server",
    }
    figures = {}
    for label, url in pages.items():
        first = timed(url)
        warm = [timed(url) for _ in range(reps)]
        figures[label] = {"first_s": round(first, 4), "median_s": round(statistics.median(warm), 4)}
        print(f"{label:34} first {first * 1000:8.1f} ms   median of {reps} {statistics.median(warm) * 1000:8.1f} ms")
    return figures


def screenshot(url: str, path: Path) -> None:
    """The page as headless Chromium shows it (a tall window, so the preview and chain are in it)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--window-size=1280,1500"):
        options.add_argument(argument)
    options.add_argument(f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-')}")
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.set_page_load_timeout(PAGE_TIMEOUT)
        driver.get(url)
        driver.save_screenshot(str(path))
    finally:
        driver.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--screenshot", action="store_true")
    parser.add_argument("--s3", action="store_true", help="serve from the local S3 instead of the embedded store")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ui-") as temp:
        work = Path(temp)
        started = time.perf_counter()
        build(work / "ws", work, args.blocks)
        print(f"built a {args.blocks}-block dataset in {time.perf_counter() - started:.1f} s", flush=True)
        process, base = serve(work / "server", args.s3)
        try:
            started = time.perf_counter()
            run("push", NAME, f"{base}/{NAME}", "--workspace", str(work / "ws"))
            print(f"pushed it in {time.perf_counter() - started:.1f} s", flush=True)
            figures = measure(base, args.blocks, args.reps)
            OUT.mkdir(parents=True, exist_ok=True)
            path = OUT / "timings.json"
            report = json.loads(path.read_text()) if path.exists() else {}
            report["s3" if args.s3 else "embedded"] = {
                "blocks": args.blocks,
                "reps": args.reps,
                "cpus": os.cpu_count(),
                "pages": figures,
            }
            path.write_text(json.dumps(report, indent=2) + "\n")
            if args.screenshot:
                screenshot(f"{base}/ui/datasets/{NAME}", OUT / "readme-dataset.png")
        finally:
            process.terminate()
            process.wait(10)


if __name__ == "__main__":
    main()
