"""The Spark session: local mode by default, any cluster by ``--master``; bound to loopback locally."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: The default master: two local cores (the machines this project targets have two).
DEFAULT_MASTER = "local[2]"
_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")


class SparkUnavailable(Exception):
    """pyspark (the ``spark`` extra) or Java is missing."""


def spark_session(master: str = DEFAULT_MASTER, app_name: str = "smart-transfer-ingest") -> Any:
    """A SparkSession configured for deterministic output and quiet logs."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkUnavailable("ingest needs pyspark: pip install 'smart-transfer[spark]'") from None
    builder = SparkSession.builder.master(master).appName(app_name)
    if master.startswith("local"):
        # a local run listens on loopback only (driver RPC, block manager; no web UI at all)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
    options = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.parquet.compression.codec": "snappy",
        "spark.driver.extraJavaOptions": f"-Dlog4j.configurationFile={_LOG_CONFIG}",
        # no _SUCCESS marker files in what we write
        "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    }
    for key, value in options.items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except Exception as exc:  # Java missing, port trouble: py4j raises plain exceptions
        raise SparkUnavailable(f"Spark did not start: {str(exc).splitlines()[0] if str(exc) else exc}") from None
    session.sparkContext.setLogLevel("ERROR")
    return session
