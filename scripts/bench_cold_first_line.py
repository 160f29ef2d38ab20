"""The first line of the first Delta Sharing query after a server restarts, on tables of 1,000, 10,000 and
100,000 slices (one block each; built as ``bench_sharing_tables.py`` builds them, on the embedded store):
each size is served once and queried whole (so the index holds what a running server had recorded: every
slice's statistics, and whatever else it keeps), the server is stopped, started again on the same root,
and the first query's first line (the protocol line) and whole answer are timed, with the server's peak RSS.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_cold_first_line.py [--sizes 1000,10000,100000]

Prints one JSON line per size and writes bench-results/sharing/cold-first-line.json. Bounded: each answer
waits at most 1,800 s, each server start 60 s."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_sharing_tables import DISTINCT, OUT, TABLE, _slices, build, memory_kib, timed_lines
from bench_ui import serve


def restart_case(work: Path, files: int, objects: list[bytes]) -> dict[str, Any]:
    """One size: build, serve and read whole, restart, time the first query's first line."""
    root = work / f"server-{files}"
    started = time.perf_counter()
    build(root, files, objects)
    figures: dict[str, Any] = {"files": files, "build_s": time.perf_counter() - started}
    process, url = serve(root, False)
    try:
        figures["first_start"] = timed_lines("POST", f"{url}{TABLE}/query", {}, {})
    finally:
        process.terminate()
        process.wait(30)
    process, url = serve(root, False)
    try:
        figures["after_restart"] = timed_lines("POST", f"{url}{TABLE}/query", {}, {})
        figures["peak_rss_mib"] = memory_kib(process.pid)["peak"] / 1024
    finally:
        process.terminate()
        process.wait(30)
    print(json.dumps(figures), flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--out", default=str(OUT / "cold-first-line.json"))
    args = parser.parse_args()
    report: dict[str, Any] = {"cpus": os.cpu_count(), "load_before": os.getloadavg(), "tables": []}
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as temp:
        objects = _slices(DISTINCT)
        for size in (int(text) for text in args.sizes.split(",")):
            report["tables"].append(restart_case(Path(temp), size, objects))
    report["load_after"] = os.getloadavg()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
