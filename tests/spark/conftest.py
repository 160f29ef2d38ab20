"""One local Spark session for the Spark tests (starting a JVM costs ~10 s), and a real standalone
cluster (a master and a worker from pyspark's own ``spark-class``, separate processes bound to
127.0.0.1 on ephemeral ports) for the tests that run the same job on it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from smart_transfer.ingest.spark import jvm_output, spark_session

#: How long a master or worker may take to say it is up.
CLUSTER_START_TIMEOUT = 90.0


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    with jvm_output(verbose=False) as log:
        session = spark_session("local[2]", "smart-transfer-tests")
    yield session
    session.stop()
    if log is not None:  # the JVM's output, kept for a failing test's reader until here
        log.unlink(missing_ok=True)


@dataclass(frozen=True)
class StandaloneCluster:
    master_url: str
    logs: Path


def _spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def _wait_for(log: Path, pattern: str, process: subprocess.Popen[bytes]) -> re.Match[str]:
    deadline = time.monotonic() + CLUSTER_START_TIMEOUT
    while time.monotonic() < deadline:
        match = re.search(pattern, log.read_text(errors="replace")) if log.exists() else None
        if match:
            return match
        if process.poll() is not None:
            break
        time.sleep(0.2)
    raise RuntimeError(f"{log.name}: no {pattern!r}:\n{log.read_text(errors='replace')[-3000:]}")


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen([_spark_class(), *args], stdout=out, stderr=subprocess.STDOUT, env=env)


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A Spark standalone master and one worker (1 core, 1 GiB), stopped at the end of the session."""
    logs = tmp_path_factory.mktemp("spark-cluster")
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(logs),
        "SPARK_WORKER_DIR": str(logs / "work"),
        "PYSPARK_PYTHON": sys.executable,  # executors' Python workers: this interpreter and its packages
    }
    master = _start(
        ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0", "--webui-port", "0"],
        logs / "master.log",
        env,
    )
    processes = [master]
    try:
        url = _wait_for(logs / "master.log", r"Starting Spark master at (spark://127\.0\.0\.1:\d+)", master).group(1)
        worker = _start(
            [
                "org.apache.spark.deploy.worker.Worker",
                url,
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--webui-port",
                "0",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--work-dir",
                str(logs / "work"),
            ],
            logs / "worker.log",
            env,
        )
        processes.append(worker)
        _wait_for(logs / "worker.log", r"Successfully registered with master", worker)
        yield StandaloneCluster(url, logs)
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
