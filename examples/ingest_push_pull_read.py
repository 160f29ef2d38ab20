"""Ingest with Spark, push to a server, pull elsewhere, and read the data back with pandas and Spark.

    python examples/ingest_push_pull_read.py [SERVER_URL]

Without SERVER_URL a local server (embedded store) is started in a temporary directory and stopped at
the end. Each step is a cell (``# %%``): VS Code and Jupytext open the file as a notebook.
"""

# %% Setup: a scratch directory, and a server to talk to
from __future__ import annotations

import csv
import random
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from smart_transfer.client import SyncClient, open_dataset
from smart_transfer.ingest import ingest
from smart_transfer.ingest.spark import spark_session

CLI = [sys.executable, "-m", "smart_transfer.cli.main"]
work = Path(tempfile.mkdtemp(prefix="smart-transfer-example-"))
server = None
if len(sys.argv) > 1:
    server_url = sys.argv[1].rstrip("/")
else:
    with socket.socket() as probe:  # a free port (the server takes ports 1-65535, not "any": 0)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [*CLI, "serve", "--host", "127.0.0.1", "--port", str(port), "--root", str(work / "server")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    announced = re.search(r"listening on (\S+)", server.stdout.readline())
    assert announced is not None, "the server did not start"
    server_url = announced.group(1)
print(f"server: {server_url}; files under {work}")

try:
    # %% 1. Sample data: 10,000 orders as CSV
    random.seed(15)
    orders_csv = work / "orders.csv"
    with open(orders_csv, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["order_id", "customer", "amount"])
        writer.writerows((i, f"c{random.randrange(100)}", random.randrange(1, 1000)) for i in range(10_000))

    # %% 2. Ingest with Spark into workspace A, on a SparkSession this script keeps for step 6 (the
    # `smart-transfer ingest` command runs the same job on a session of its own)
    spark = spark_session("local[2]", "smart-transfer-example")
    workspace_a, workspace_b = work / "workspace-a", work / "workspace-b"
    result = ingest(workspace_a, "orders", orders_csv, spark=spark, primary_key=["order_id"])
    print(f"ingested {result.rows_added} row(s) as slice {result.data_slice}")

    # %% 3. Push from A; the dataset remembers the server as its remote
    with SyncClient(workspace_a) as client:
        pushed = client.push("orders", f"{server_url}/orders")
        print(f"pushed {pushed.blocks} block(s), {pushed.objects_transferred} object(s)")
        print(f"A compared with its remote: {client.status('orders').relation}")

    # %% 4. Pull into workspace B (another machine, in real life)
    with SyncClient(workspace_b) as client:
        pulled = client.pull(f"{server_url}/orders")
        print(f"pulled {pulled.blocks} block(s), {pulled.bytes_transferred} bytes; head {pulled.new_head}")

    # %% 5. Read in B with pandas: the committed data, whatever a pull may be doing meanwhile
    with open_dataset(workspace_b, "orders") as orders:
        frame = orders.to_pandas()
        print(f"pandas: {len(frame)} rows, columns {list(frame.columns)}")
        sums = frame.assign(amount=frame["amount"].astype(int)).groupby("customer")["amount"].sum()
        top = {customer: int(amount) for customer, amount in sums.nlargest(3).items()}
        print("pandas top customers:", top)
        print("last 3 orders:", orders.tail(3).to_pylist())
        slices = orders.files()

    # %% 6. Read in B with Spark: Spark reads the slice files itself (on a cluster: a shared workspace)
    from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention

    try:
        with open_dataset(workspace_b, "orders") as orders:
            df = orders.to_spark(spark)
            spark_top = (
                df.groupBy("customer")
                .agg(F.sum(F.col("amount").cast("long")).alias("amount"))
                .orderBy(F.desc("amount"))
                .limit(3)
                .collect()
            )
            print(f"spark: {df.count()} rows from {len(slices)} slice file(s)")
            print("spark top customers:", {row["customer"]: row["amount"] for row in spark_top})
            same = {row["customer"]: row["amount"] for row in spark_top} == top
            print("pandas and Spark agree" if same else "pandas and Spark DISAGREE")
    finally:
        spark.stop()
finally:
    if server is not None:
        server.terminate()
        server.wait(10)
