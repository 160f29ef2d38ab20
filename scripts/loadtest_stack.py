"""What the load test runs against (scripts/loadtest.py): the local S3, server processes on 127.0.0.1,
nginx in front of replicas, the tokens file and the seed datasets. Everything started here is stopped by
``Stack.close`` (the driver calls it in ``finally``), by process id or instance directory, never by name."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import free_port, free_port_pair

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "smart_transfer.cli.main"]
START_TIMEOUT = 60.0
SEED_OBJECTS = 10
SEED_SIZE = 4096


@dataclass
class Server:
    """A `smart-transfer serve` process and its URL."""

    process: subprocess.Popen[str]
    url: str
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def start_server(root: Path, extra: list[str], env: dict[str, str], started: list[Server]) -> Server:
    """A server on a free port, put in ``started`` at once (so an interrupt while it starts still stops it);
    waits for its 'listening on' line (its output goes to root/../NAME.log)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    log = root.parent / f"{root.name}.log"
    command = [*CLI, "serve", "--host", "127.0.0.1", "--port", str(free_port()), "--root", str(root), *extra]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    server = Server(process, "", log)
    started.append(server)
    found = threading.Event()
    urls: list[str] = []

    def copy() -> None:
        assert process.stdout is not None
        with log.open("w") as out:
            for line in process.stdout:
                out.write(line)
                out.flush()
                match = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
                if match and not urls:
                    urls.append(match.group(1))
                    found.set()

    threading.Thread(target=copy, daemon=True).start()
    if not found.wait(START_TIMEOUT):
        raise RuntimeError(f"server did not start (see {log})")
    server.url = urls[0]
    return server


@dataclass
class Stack:
    """One configuration: a store (local or s3) and a topology (one server, or two replicas + nginx)."""

    work: Path
    store: str
    replicas: int
    s3: dict[str, str] | None
    env: dict[str, str]
    serve_args: list[str]
    servers: list[Server] = field(default_factory=list)
    nginx_dir: Path | None = None
    url: str = ""
    admin: str = ""
    tokens: list[str] = field(default_factory=list)
    seed: dict[str, str] = field(default_factory=dict)

    @property
    def s3_directory(self) -> Path | None:
        """The directory of the local S3 this run started (None: the embedded store, or an S3 given)."""
        if self.store != "s3" or self.s3 is None or "directory" not in self.s3:
            return None
        return Path(self.s3["directory"])

    @property
    def name(self) -> str:
        return f"{self.store}, " + ("one server" if self.replicas == 1 else f"{self.replicas} replicas + nginx")

    def start(self, users: int) -> None:
        """Tokens, the servers (and nginx), then the seed datasets."""
        self.work.mkdir(parents=True, exist_ok=True)
        tokens_file = self.work / "tokens.json"
        self._tokens(tokens_file, users)
        extra = ["--tokens", str(tokens_file), *self.serve_args]
        if self.store == "s3":
            assert self.s3 is not None
            extra += ["--s3-endpoint", self.s3["endpoint"], "--s3-bucket", self.s3["bucket"]]
            extra += ["--s3-prefix", f"loadtest-{secrets.token_hex(6)}"]
        for index in range(self.replicas):
            start_server(self.work / f"server{index}", extra, self.env, self.servers)
        self.url = self.servers[0].url if self.replicas == 1 else self._nginx()
        self._seed()

    def _tokens(self, path: Path, users: int) -> None:
        """An admin token (seeding, checks) and one token per user (read all, write its push datasets)."""
        from smart_transfer.server.auth import add_token

        self.admin = add_token(path, "loadtest-admin", ["*"], ["*"])
        self.tokens = [add_token(path, f"user{i}", ["*"], ["push-*"]) for i in range(users)]

    def _nginx(self) -> str:
        self.nginx_dir = self.work / "nginx"
        upstreams = [server.url.removeprefix("http://") for server in self.servers]
        command = ["bash", str(ROOT / "scripts" / "nginx-local.sh"), "start", str(self.nginx_dir)]
        result = subprocess.run(
            [*command, str(free_port()), "60s", *upstreams], capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise RuntimeError(f"nginx did not start: {result.stderr[-2000:]}")
        return result.stdout.strip().splitlines()[-1]

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """The CLI with the admin token; raises with its stderr when it fails."""
        env = {**self.env, "SMART_TRANSFER_TOKEN": self.admin}
        result = subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=timeout, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"smart-transfer {' '.join(args[:2])} failed: {result.stderr[-1500:]}")
        return result

    def _seed(self) -> None:
        """seed10: 10 objects of 4 KiB (pulled and read); table1: one small Parquet slice (shared)."""
        inbox, workspace = self.work / "seed-in", self.work / "seed-ws"
        inbox.mkdir(parents=True, exist_ok=True)
        files = []
        for index in range(SEED_OBJECTS):
            path = inbox / f"o{index}.bin"
            path.write_bytes(os.urandom(SEED_SIZE))
            files.append(str(path))
        self.cli("add", "seed10", *files, "--workspace", str(workspace))
        self.cli("push", "seed10", f"{self.url}/seed10", "--workspace", str(workspace))
        blocks = [
            json.loads(line)
            for line in self.cli("log", "seed10", "--json", "--workspace", str(workspace)).stdout.splitlines()
        ]
        data = next(block for block in blocks if block["type"] == "AddData")
        self.seed = {"seed": "seed10", "block": data["hash"], "object": data["new_data"]["physical_hash"]}
        table = _parquet(inbox / "table.parquet", 100)
        self.cli("add", "table1", str(table), "--records", "100", "--workspace", str(workspace))
        self.cli("push", "table1", f"{self.url}/table1", "--workspace", str(workspace))
        self.seed["table"] = "table1"

    def server_pids(self) -> dict[str, int]:
        return {f"server{i}": server.process.pid for i, server in enumerate(self.servers)}

    def close(self) -> None:
        if self.nginx_dir is not None:
            subprocess.run(["bash", str(ROOT / "scripts" / "nginx-local.sh"), "stop", str(self.nginx_dir)], check=False)
        for server in self.servers:
            server.stop()


def _parquet(path: Path, rows: int) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": pa.array(range(rows), pa.int64()), "value": [f"v{i}" for i in range(rows)]}), path)
    return path


class LocalS3:
    """A private local S3 (scripts/s3-local.sh) in ``directory``, stopped by ``stop``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.started = False

    def start(self, port: int = 0) -> dict[str, Any]:
        """Start it on ``port`` (and the next, its monitor's), or on a free pair; its environment."""
        script = str(ROOT / "scripts" / "s3-local.sh")
        self.started = True  # stop even a half-started instance
        result = subprocess.run(
            ["bash", script, "start", str(self.directory), str(port or free_port_pair())],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"local S3 did not start: {result.stderr[-2000:]}")
        return dict(re.findall(r"^export (\w+)=(.*)$", result.stdout, re.M))

    def stop(self) -> None:
        if self.started:
            subprocess.run(["bash", str(ROOT / "scripts" / "s3-local.sh"), "stop", str(self.directory)], check=False)
