"""The same job on a real Spark standalone cluster (master and worker as separate processes): executors
read, dedup, number and write, and the result is byte for byte what local mode writes."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from smart_transfer.ingest import ingest
from smart_transfer.repo import Workspace
from tests.conftest import CLI
from tests.spark.conftest import StandaloneCluster
from tests.spark.data import rows, write_csv


def ingest_cli(workspace: Path, data: Path, *extra: str) -> dict[str, object]:
    result = subprocess.run(
        [
            *CLI,
            "ingest",
            "ds",
            "--input",
            str(data),
            "--primary-key",
            "id",
            "--json",
            "--workspace",
            str(workspace),
            *extra,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    summary: dict[str, object] = orjson.loads(result.stdout)
    return summary


# two ingests on the cluster, each a CLI process and a JVM start (beside other test workers' JVMs on
# two cores four of them outgrew the suite's 300 s default); the local-mode references run in this
# process's shared local session (the CLI's master, local[2], and the same job): that CLI processes
# agree with each other is test_ingest_errors.py's test_cli_slices_are_identical_across_processes
@pytest.mark.timeout(900)
def test_a_standalone_cluster_ingests_and_dedups_like_local_mode(
    standalone_cluster: StandaloneCluster, spark: Any, tmp_path: Path
) -> None:
    on_cluster = ("--master", standalone_cluster.master_url, "--conf", "spark.executor.memory=768m")
    base = [(str(i), f'name "{i}", with\nnewline', str(i % 13)) for i in range(3000)]
    first = write_csv(tmp_path / "1.csv", base)
    second = write_csv(tmp_path / "2.csv", [*base[:100], ("5", "changed", "0"), ("3000", "new", "1"), ("7", "x", "1")])
    cluster, local = tmp_path / "cluster", tmp_path / "local"

    one = ingest_cli(cluster, first, *on_cluster)
    assert (one["rows_read"], one["rows_added"]) == (3000, 3000)
    two = ingest_cli(cluster, second, *on_cluster)
    assert (two["rows_read"], two["rows_added"]) == (103, 3)
    # the executors ran in the worker's own processes
    assert list((standalone_cluster.logs / "work").glob("app-*/*/stderr"))

    assert ingest(local, "ds", first, spark=spark, primary_key=["id"]).data_slice == one["data_slice"]
    assert ingest(local, "ds", second, spark=spark, primary_key=["id"]).data_slice == two["data_slice"]
    with Workspace(cluster) as ws:
        added = rows(ws, "ds")[3000:]
    assert [(r["offset"], r["id"], r["name"]) for r in added] == [
        (3000, "5", "changed"),
        (3001, "3000", "new"),
        (3002, "7", "x"),
    ]
