"""How fast each listing face answers its first page on a server holding many datasets (10,000 by default),
on the embedded store and on the local S3, and how much memory the server holds while it answers.

The datasets are real: each is a Seed and a SetDataSchema committed through the repository layer (the
verified commit, the same as a push ends in), so they are listable, pullable and Delta Sharing tables;
written straight into the server's store and index before it starts, 16 at a time, instead of 10,000
pushes. Then a real ``smart-transfer serve`` answers, timed from outside:

- ``GET /`` (first page, default size), ``GET /ui`` (the web view's first page, signed in),
  Delta Sharing ``all-tables`` (first page, default size), for a token reading every dataset and
  for one reading a few of them (``ds-0999*``: the bounded scan);
- the delta-sharing client's ``list_all_tables`` (every page) and ``smart-transfer ls`` (first row
  printed, and every page);
- the server's RSS after start and at the end, and its peak (VmHWM).

    PYTHONPATH=$PWD .venv/bin/python scripts/many_datasets.py [--datasets 10000] [--reps 3] [--store local|s3|both]

S3 needs SMART_TRANSFER_TEST_S3_ENDPOINT and _BUCKET (``source /work/wt/s3-env.sh`` or scripts/s3-local.sh env).
Prints one line per measure and writes bench-results/many-datasets/timings-STORE.json."""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from loadtest_stack import Server, start_server

from smart_transfer.model import DataField, SetDataSchema
from smart_transfer.repo import Repository
from smart_transfer.server.settings import ServerSettings

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "smart_transfer.cli.main"]
OUT = ROOT / "bench-results" / "many-datasets"
#: Bounds (seconds) on one answer and one command.
ANSWER_TIMEOUT = 120.0
COMMAND_TIMEOUT = 900.0
WRITERS = 16
FIELDS = (DataField("offset", "BIGINT", False), DataField("name", "STRING"))


def s3_args(prefix: str) -> list[str]:
    endpoint = os.environ.get("SMART_TRANSFER_TEST_S3_ENDPOINT")
    bucket = os.environ.get("SMART_TRANSFER_TEST_S3_BUCKET")
    if not endpoint or not bucket:
        raise SystemExit("the s3 store needs SMART_TRANSFER_TEST_S3_ENDPOINT and _BUCKET (source /work/wt/s3-env.sh)")
    return ["--s3-endpoint", endpoint, "--s3-bucket", bucket, "--s3-prefix", prefix]


def build(root: Path, kind: str, count: int, reuse: str | None) -> list[str]:
    """``count`` datasets committed into the store and index the server will open; its ``serve`` options.
    ``reuse``: an S3 prefix a run before built them under (its server index starts cold)."""
    if kind == "s3" and reuse:
        return s3_args(reuse)
    extra = s3_args(f"many-{os.getpid()}-{time.time_ns()}") if kind == "s3" else []
    settings = ServerSettings(root=root)
    if extra:
        settings = ServerSettings(root=root, s3_endpoint=extra[1], s3_bucket=extra[3], s3_prefix=extra[5])
    store = settings.open_store(1)
    started = time.perf_counter()
    with Repository(store, settings.index_path(store)) as repository:
        names = [f"ds-{i:05d}" for i in range(count)]
        with ThreadPoolExecutor(WRITERS) as pool:
            list(pool.map(lambda name: repository.dataset(name).append([SetDataSchema(FIELDS)]), names))
    print(f"[{kind}] built {count} datasets in {time.perf_counter() - started:.1f} s", flush=True)
    return extra


def add_token(tokens: Path, subject: str, pattern: str) -> str:
    result = subprocess.run(
        [*CLI, "token", "add", "--tokens", str(tokens), "--subject", subject, "--read", pattern],
        capture_output=True,
        text=True,
        check=True,
        timeout=COMMAND_TIMEOUT,
    )
    return re.findall(r"st_[A-Za-z0-9_-]+", result.stdout)[0]


def memory_kib(pid: int) -> dict[str, int]:
    """The process's RSS and peak RSS (KiB)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {name: int(fields[name].split()[0]) for name in ("VmRSS", "VmHWM")}


def fetch(url: str, headers: dict[str, str]) -> bytes:
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=ANSWER_TIMEOUT) as answer:
        assert answer.status == 200, (url, answer.status)
        body: bytes = answer.read()
    return body


def timed(action: Callable[[], Any], reps: int) -> tuple[float, Any]:
    """The median seconds of ``reps`` runs of ``action``, and its last result."""
    times, result = [], None
    for _ in range(reps):
        started = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def first_pages(url: str, token: str, reps: int) -> dict[str, Any]:
    bearer = {"Authorization": f"Bearer {token}"}
    cookie = {"Cookie": f"smart_transfer_token={token}"}
    sharing = f"{url}/delta-sharing/shares/smart-transfer/all-tables"
    rest, listed = timed(lambda: json.loads(fetch(f"{url}/", bearer)), reps)
    ui, page = timed(lambda: fetch(f"{url}/ui", cookie), reps)
    tables, answer = timed(lambda: json.loads(fetch(sharing, bearer)), reps)
    return {
        "GET / first page": (rest, len(listed["datasets"]), listed.get("next_page_token") is not None),
        "web view first page": (ui, page.count(b'class="dataset"'), b'id="next-page"' in page),
        "all-tables first page": (tables, len(answer["items"]), "nextPageToken" in answer),
    }


def whole_listings(root: Path, url: str, token: str) -> dict[str, Any]:
    """The delta-sharing client's list_all_tables (every page) and ``ls`` (first row, every page)."""
    import delta_sharing

    profile = root / "reader.share"
    endpoint = f"{url}/delta-sharing"
    profile.write_text(json.dumps({"shareCredentialsVersion": 1, "endpoint": endpoint, "bearerToken": token}))
    started = time.perf_counter()
    tables = delta_sharing.SharingClient(str(profile)).list_all_tables()
    sharing = time.perf_counter() - started
    started = time.perf_counter()
    process = subprocess.Popen([*CLI, "ls", url, "--token", token], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    process.stdout.readline()  # the header
    process.stdout.readline()  # the first row
    first_row = time.perf_counter() - started
    rows = 2 + sum(1 for _ in process.stdout)
    process.wait(COMMAND_TIMEOUT)
    return {
        "list_all_tables, every page": (sharing, len(tables), False),
        "ls, first row": (first_row, 1, True),
        "ls, every page": (time.perf_counter() - started, rows - 1, False),
    }


def measure(kind: str, count: int, reps: int, options: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="many-datasets-") as work:
        root = Path(work)
        extra = build(root / "server", kind, count, options.s3_prefix)
        tokens = root / "tokens.json"
        everything = add_token(tokens, "all", "*")
        few = add_token(tokens, "few", "ds-0999*")
        started: list[Server] = []
        server = start_server(root / "server", ["--tokens", str(tokens), *extra], dict(os.environ), started)
        process, url = server.process, server.url
        try:
            results: dict[str, Any] = {"rss after start (KiB)": memory_kib(process.pid)}
            for label, token in (("all", everything), ("few", few)):
                for face, figure in first_pages(url, token, reps).items():
                    results[f"{face} ({label})"] = figure
            results["rss after first pages (KiB)"] = memory_kib(process.pid)
            if not options.first_pages_only:
                results.update(whole_listings(root, url, everything))
            results["rss at the end (KiB)"] = memory_kib(process.pid)
        finally:
            server.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--store", choices=("local", "s3", "both"), default="both")
    parser.add_argument("--s3-prefix", help="datasets a run before built under this S3 prefix (no build)")
    parser.add_argument("--first-pages-only", action="store_true", help="skip the every-page listings")
    parser.add_argument("--label", default="", help="added to the results file's name (e.g. -before)")
    args = parser.parse_args()
    kinds = ["local", "s3"] if args.store == "both" else [args.store]
    report: dict[str, Any] = {"datasets": args.datasets}
    for kind in kinds:
        report[kind] = results = measure(kind, args.datasets, args.reps, args)
        for name, value in results.items():
            if isinstance(value, tuple):
                seconds, items, more = value
                print(f"[{kind}] {name}: {seconds:.3f} s, {items} item(s){', more pages' if more else ''}")
            else:
                print(f"[{kind}] {name}: {value}")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"timings-{args.store}{args.label}.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
