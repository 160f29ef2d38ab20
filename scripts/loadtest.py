"""`make loadtest`: Locust, headless, against real servers on 127.0.0.1, with a mix of users (up-to-date
pulls, 10-object pulls, small pushes, REST reads, Delta Sharing queries) at rising levels of concurrent
clients, on the embedded store and on a private local S3, against one server and against two replicas
behind nginx (replicas need a shared store: S3 only). Per level: sessions and requests per second,
p50/p95/p99 per kind end to end and of the admitted operations alone (the refused attempts and the waits
after them left out) with the refusals per kind, goodput (operations completed per second), errors, the
servers' CPU and RSS, the store's side (its gateway's and OSD's CPU, the gateway's S3 requests per second,
the servers' own store calls per second and per session of each flow, the admission limit and its
refusals), whether every refusal was the documented one, and a check that every pushed dataset is whole on
the server; per configuration, the issue's Done criteria, each PASS or FAIL with its figures. Writes
bench-results/loadtest/<date>.{md,json,png}.

    scripts/loadtest.py [--quick] [--levels 50,100,200] [--duration 60] [--stores local,s3]
                        [--topologies 1,2] [--s3-endpoint URL --s3-bucket B] [--s3-port N] [--note TEXT]

Without --s3-endpoint it starts its own S3 (scripts/s3-local.sh) on --s3-port (a free one by default) and
stops it at the end. Environment: LOADTEST_LEVELS, LOADTEST_DURATION, LOADTEST_S3_PORT (the flags win).
Every process it starts is stopped at the end, on failure and on Ctrl-C too.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loadtest_report import write_outputs
from loadtest_stack import ROOT, LocalS3, Stack
from loadtest_store import gateway_requests, server_counters, store_pids, store_side
from loadtest_verify import verify_pushes

LOCUSTFILE = ROOT / "scripts" / "loadtest_locustfile.py"
#: The user mix (Locust weights).
WEIGHTS = {"uptodate": 3, "pull10": 2, "push": 2, "rest": 3, "sharing": 2}
#: Extra seconds a level may take past its duration (start, the users' last tasks) before it is killed.
LEVEL_GRACE = 150
SAMPLE_SECONDS = 0.5
LOAD_GENERATOR = "load generator (Locust + SDK agents)"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 10 and 20 clients for 10 s each")
    parser.add_argument("--levels", default=os.environ.get("LOADTEST_LEVELS", "50,100,200"))
    parser.add_argument("--duration", type=float, default=float(os.environ.get("LOADTEST_DURATION", "60")))
    parser.add_argument("--stores", default="local,s3", help="local, s3 or both")
    parser.add_argument("--topologies", default="1,2", help="1: one server; 2: two replicas behind nginx")
    parser.add_argument("--agents", type=int, default=2, help="SDK agent processes (scripts/loadtest_agent.py)")
    parser.add_argument("--wait", default="0.5,1.5", help="each user's think time between tasks, min,max s")
    parser.add_argument("--s3-endpoint", help="a running S3 to use (a fresh prefix) instead of starting one")
    parser.add_argument("--s3-bucket", default="smart-transfer")
    parser.add_argument(
        "--s3-port",
        type=int,
        default=int(os.environ.get("LOADTEST_S3_PORT", "0")),
        help="the port of the S3 this run starts (its monitor takes the next one); 0: a free pair",
    )
    parser.add_argument(
        "--serve-args",
        default="",
        help="extra `serve` options for every server, e.g. '--max-sessions 8 --max-requests 16' to force overload",
    )
    parser.add_argument("--out", default=str(ROOT / "bench-results" / "loadtest"))
    parser.add_argument("--note", default="", help="a line put at the top of the report")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, workspaces)")
    args = parser.parse_args(argv)
    if args.quick:
        args.levels, args.duration = "10,20", 10.0
    args.levels = [int(level) for level in str(args.levels).split(",")]
    if not args.levels or min(args.levels) < 1 or max(args.levels) > 1000 or not 1 <= args.duration <= 3600:
        parser.error("levels must be 1..1000 clients, the duration 1..3600 s")
    return args


def configurations(args: argparse.Namespace) -> list[tuple[str, int]]:
    """(store, replicas) pairs; two replicas only on S3 (the embedded store is one server's own disk)."""
    pairs = []
    for store in args.stores.split(","):
        for replicas in (int(t) for t in args.topologies.split(",")):
            if store == "s3" or replicas == 1:
                pairs.append((store, replicas))
    return pairs


class Sampler:
    """Samples CPU (% of one core) and RSS of process trees (a process and its children, summed) every
    SAMPLE_SECONDS, in a thread: the servers, and the load generator (Locust and its SDK agents) that
    shares the machine with them."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.roots: dict[str, int] = {}
        self.known: dict[int, psutil.Process] = {}
        self.samples: dict[str, list[tuple[float, int]]] = {}
        self.lock = threading.Lock()
        for name, pid in pids.items():
            self.watch(name, pid)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def watch(self, name: str, pid: int) -> None:
        with self.lock:
            self.roots[name] = pid
            self.samples[name] = []

    def _tree(self, pid: int) -> list[psutil.Process]:
        root = self.known.setdefault(pid, psutil.Process(pid))
        tree = [root]
        for child in root.children(recursive=True):
            tree.append(self.known.setdefault(child.pid, child))
        return tree

    def _run(self) -> None:
        while not self.stopped.wait(SAMPLE_SECONDS):
            with self.lock:
                roots = dict(self.roots)
            for name, pid in roots.items():
                try:
                    tree = self._tree(pid)
                    cpu = sum(process.cpu_percent(None) for process in tree)
                    rss = sum(process.memory_info().rss for process in tree)
                    if rss:  # an exited process (a zombie) has none
                        self.samples[name].append((cpu, rss))
                except psutil.Error:
                    continue

    def stop(self) -> dict[str, dict[str, float]]:
        self.stopped.set()
        self.thread.join(5)
        summary = {}
        for name, samples in self.samples.items():
            cpus, rss = [s[0] for s in samples] or [0.0], [s[1] for s in samples] or [0]
            summary[name] = {
                "cpu_mean_pct": round(sum(cpus) / len(cpus), 1),
                "cpu_max_pct": round(max(cpus), 1),
                "rss_peak_mib": round(max(rss) / 2**20, 1),
                "rss_end_mib": round(rss[-1] / 2**20, 1),
            }
        return summary


def run_locust(
    stack: Stack, clients: int, duration: float, level_dir: Path, args: argparse.Namespace, sampler: Sampler
) -> Path:
    """One level: Locust headless for ``duration`` seconds after all users started; its CSV prefix."""
    wait_min, wait_max = args.wait.split(",")
    config = {
        "url": stack.url,
        "seed_url": f"{stack.url}/seed10",
        "tokens": stack.tokens[:clients],
        "work": str(level_dir / "ws"),
        "push_prefix": f"push-c{clients}",
        "pushes": str(level_dir / "pushes.jsonl"),
        "outcomes": str(level_dir / "outcomes.json"),
        "admitted": str(level_dir / "admitted.json"),
        "agents": args.agents,
        "weights": WEIGHTS,
        "wait_min": wait_min,
        "wait_max": wait_max,
        **stack.seed,
    }
    (level_dir / "config.json").write_text(json.dumps(config))
    prefix = level_dir / "locust"
    command = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary"]
    command += ["-u", str(clients), "-r", str(clients), "-t", f"{int(duration)}s", "--reset-stats"]
    command += ["--host", stack.url, "--csv", str(prefix), "--stop-timeout", "30", "--loglevel", "INFO"]
    env = {**stack.env, "LT_CONFIG": str(level_dir / "config.json")}
    with (level_dir / "locust.log").open("w") as log:
        locust = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        sampler.watch(LOAD_GENERATOR, locust.pid)
        try:
            locust.wait(duration + LEVEL_GRACE)
        except subprocess.TimeoutExpired:
            os.killpg(locust.pid, signal.SIGKILL)  # its own session: Locust and its agents, nothing else
            locust.wait(10)
            raise RuntimeError(
                f"Locust did not finish {clients} clients in time (see {level_dir}/locust.log)"
            ) from None
        finally:
            if locust.poll() is None:
                os.killpg(locust.pid, signal.SIGKILL)
                locust.wait(10)
    return prefix


def read_stats(prefix: Path) -> dict[str, Any]:
    """Locust's CSVs: per kind (name) counts, rate and percentiles (ms); failures by kind and error."""
    kinds = {}
    with Path(f"{prefix}_stats.csv").open() as stats:
        for row in csv.DictReader(stats):
            kinds[row["Name"]] = {
                "type": row["Type"],
                "count": int(row["Request Count"]),
                "failures": int(row["Failure Count"]),
                "per_s": round(float(row["Requests/s"]), 2),
                **{p: _ms(row[f"{p}%"]) for p in ("50", "95", "99")},
            }
    with Path(f"{prefix}_failures.csv").open() as failures:
        errors = [
            {"kind": r["Name"], "error": r["Error"], "count": int(r["Occurrences"])} for r in csv.DictReader(failures)
        ]
    with Path(f"{prefix}_exceptions.csv").open() as exceptions:  # a user's task that crashed: a bug here
        for row in csv.DictReader(exceptions):
            errors.append({"kind": "locust user crashed", "error": row["Message"], "count": int(row["Count"])})
    return {"kinds": kinds, "errors": errors}


def _ms(value: str) -> float | None:
    return None if value in ("", "N/A") else float(value)


def percentile(ordered: list[float], share: float) -> float | None:
    """The nearest-rank percentile of ``ordered`` (sorted), or None when it is empty."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def read_admitted(path: Path) -> dict[str, dict[str, Any]]:
    """Per kind, and over every kind ("Aggregated"), the admitted operations' count and p50/p95/p99 (ms,
    like Locust's), the documented refusals and the unanswered operations (the Locust file's ADMITTED)."""
    raw = json.loads(path.read_text()) if path.exists() else {}
    everything: list[float] = []
    kinds: dict[str, dict[str, Any]] = {}
    for name, kind in raw.items():
        seconds = sorted(kind["admitted"])
        everything += seconds
        kinds[name] = _admitted_row(kind["type"], seconds, kind["refused"], kind["unanswered"])
    refusals = sum(k["refused"] for k in kinds.values())
    unanswered = sum(k["unanswered"] for k in kinds.values())
    kinds["Aggregated"] = _admitted_row("", sorted(everything), refusals, unanswered)
    return kinds


def _admitted_row(kind: str, seconds: list[float], refused: int, unanswered: int) -> dict[str, Any]:
    row: dict[str, Any] = {"type": kind, "count": len(seconds), "refused": refused, "unanswered": unanswered}
    for share in ("50", "95", "99"):
        value = percentile(seconds, int(share) / 100)
        row[share] = None if value is None else round(value * 1000, 1)
    return row


#: Outcomes that are a success or the documented refusal; anything else fails the verdict.
DOCUMENTED = {
    "sdk ok",
    "sdk busy retries",
    "sdk Busy (documented)",
    "rest ok",
    "rest 429 with Retry-After",
    "rest 503 with Retry-After",
}


def probe(stack: Stack) -> dict[str, dict[str, float]]:
    """The counters a level's store side is the difference of (scripts/loadtest_store.py)."""
    urls = [server.url for server in stack.servers]
    return {"gateway": gateway_requests(stack.s3_directory), "servers": server_counters(urls, stack.admin)}


def run_level(stack: Stack, clients: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    level_dir = work / f"{stack.store}-{stack.replicas}" / f"c{clients}"
    level_dir.mkdir(parents=True, exist_ok=True)
    print(f"loadtest: {stack.name}: {clients} clients for {args.duration:.0f} s", flush=True)
    store = store_pids(stack.s3_directory) if stack.s3_directory is not None else {}
    sampler = Sampler({**stack.server_pids(), **store})
    before = probe(stack)
    started = time.monotonic()
    try:
        prefix = run_locust(stack, clients, args.duration, level_dir, args, sampler)
    finally:
        servers = sampler.stop()
    wall = time.monotonic() - started
    store_cost = store_side(before, probe(stack), wall)
    outcomes = json.loads((level_dir / "outcomes.json").read_text()) if (level_dir / "outcomes.json").exists() else {}
    result = {"config": stack.name, "clients": clients, "wall_s": round(wall, 1), **read_stats(prefix)}
    result["admitted"] = read_admitted(level_dir / "admitted.json")
    result.update(servers=servers, outcomes=outcomes, store=store_cost)
    result["undocumented"] = {k: v for k, v in outcomes.items() if k not in DOCUMENTED and v}
    crashed = sum(e["count"] for e in result["errors"] if e["kind"] == "locust user crashed")
    if crashed:
        result["undocumented"]["locust user crashed"] = crashed
    result["servers_alive"] = all(server.process.poll() is None for server in stack.servers)
    checked = time.monotonic()
    result["verify"] = verify_pushes(level_dir / "pushes.jsonl", stack.url, stack.admin, level_dir / "verify")
    result["verify_s"] = round(time.monotonic() - checked, 1)
    print(f"loadtest:   done in {wall:.0f} s (+{result['verify_s']:.0f} s verify); outcomes {outcomes}", flush=True)
    return result


def run_configuration(
    store: str, replicas: int, s3: dict[str, str] | None, args: argparse.Namespace, work: Path
) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    stack = Stack(work / f"{store}-{replicas}", store, replicas, s3, env, args.serve_args.split())
    try:
        started = time.monotonic()
        stack.start(max(args.levels))
        print(f"loadtest: {stack.name} at {stack.url} (ready in {time.monotonic() - started:.0f} s)", flush=True)
        return [run_level(stack, clients, args, work) for clients in args.levels]
    finally:
        stack.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    work = Path(tempfile.mkdtemp(prefix="smart-transfer-loadtest-"))
    s3_local = LocalS3(work / "s3")
    started = time.monotonic()
    results: list[dict[str, Any]] = []
    try:
        s3 = None
        if "s3" in args.stores.split(","):
            if args.s3_endpoint:
                s3 = {"endpoint": args.s3_endpoint, "bucket": args.s3_bucket}
            else:
                found = s3_local.start(args.s3_port)
                os.environ.update(found)
                s3 = {
                    "endpoint": found["SMART_TRANSFER_TEST_S3_ENDPOINT"],
                    "bucket": found["SMART_TRANSFER_TEST_S3_BUCKET"],
                    "directory": str(s3_local.directory),
                }
        for store, replicas in configurations(args):
            results += run_configuration(store, replicas, s3, args, work)
    except KeyboardInterrupt:
        print("loadtest: interrupted; stopping everything", file=sys.stderr)
        return 130
    finally:
        s3_local.stop()
    run = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "levels": args.levels,
        "duration_s": args.duration,
        "quick": args.quick,
        "note": args.note,
        "weights": WEIGHTS,
        "wait_s": args.wait,
        "agents": args.agents,
        "serve_args": args.serve_args,
        "total_s": round(time.monotonic() - started, 1),
        "machine": {"cpus": os.cpu_count(), "load_1m": round(os.getloadavg()[0], 2)},
        "results": results,
    }
    paths = write_outputs(run, Path(args.out))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(f"loadtest: wrote {', '.join(str(p) for p in paths)}" + (f"; work directory {work}" if args.keep else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
