"""The Spark session the CLI starts: local mode by default, any cluster by ``--master``; bound to
loopback when the master is local; quiet unless asked. An SDK caller brings its own session instead
(see :mod:`smart_transfer.ingest.api`); only :data:`JOB_CONF` is applied to it, for the job's length."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from smart_transfer.ingest.errors import innermost_reason

#: The default master: two local cores (the machines this project targets have two).
DEFAULT_MASTER = "local[2]"
#: Shuffle partitions of the CLI's session (adaptive execution merges small ones).
DEFAULT_SHUFFLE_PARTITIONS = 4
#: Settings the job needs on any session: Spark's default INT96 timestamps would lose the time zone
#: and read back as nanoseconds; micros with isAdjustedToUTC keep ``timestamp[us, tz=UTC]`` exact.
JOB_CONF = {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}
_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


class SparkUnavailable(Exception):
    """pyspark (the ``spark`` extra) or Java is missing, or the session did not start."""


def _is_loopback(master: str) -> bool:
    return master.startswith("local") or urlparse(master).hostname in _LOOPBACK


def spark_session(
    master: str = DEFAULT_MASTER,
    app_name: str = "smart-transfer-ingest",
    *,
    conf: Mapping[str, str] | None = None,
    verbose: bool = False,
) -> Any:
    """A SparkSession configured for the ingest job. ``conf`` adds or overrides Spark settings."""
    try:
        # pyspark is an optional extra: its absence is SparkUnavailable, not an ImportError
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkUnavailable("ingest needs pyspark: pip install 'smart-transfer[spark]'") from None
    # Python workers (the state writer) must run this interpreter, which has pyarrow and rocksdict
    launch = {"PYSPARK_PYTHON": sys.executable}
    builder = SparkSession.builder.master(master).appName(app_name)
    if _is_loopback(master):
        # a run on this machine listens on loopback only (driver RPC, block manager; no web UI at all)
        launch["SPARK_LOCAL_IP"] = "127.0.0.1"
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
    options = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(DEFAULT_SHUFFLE_PARTITIONS),
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": f"-Dlog4j.configurationFile={_LOG_CONFIG}",
        # no _SUCCESS marker files in what we write
        "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
        **JOB_CONF,
        **(conf or {}),
    }
    for key, value in options.items():
        builder = builder.config(key, value)
    try:
        with launch_environment(launch):
            session = builder.getOrCreate()
    except Exception as exc:  # Java missing, port trouble, too little memory: py4j raises plain exceptions
        raise SparkUnavailable(f"Spark did not start: {innermost_reason(exc)}") from None
    session.sparkContext.setLogLevel("WARN" if verbose else "ERROR")
    return session


@contextlib.contextmanager
def launch_environment(values: Mapping[str, str]) -> Iterator[None]:
    """The environment the JVM and the Spark context read when they start (pyspark passes its own
    environment on, and has no other way in): each of ``values`` the process does not set already, for
    the length of the block only, then the environment as it was (library code leaves the process's
    environment alone)."""
    added = {name: value for name, value in values.items() if name not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


@contextlib.contextmanager
def jvm_output(verbose: bool) -> Iterator[Path | None]:
    """Send the output of the JVM started inside this block (and of the Python workers it forks) to
    a log file, not to the terminal: the JVM inherits file descriptors 1 and 2 when it starts, so
    they point at the log just for that moment. Yields the log's path (None when ``verbose``)."""
    if verbose:
        yield None
        return
    handle, name = tempfile.mkstemp(prefix="smart-transfer-spark-", suffix=".log")
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        os.dup2(handle, 1)
        os.dup2(handle, 2)
        try:
            yield Path(name)
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
    finally:
        for fd in (handle, *saved):
            os.close(fd)


def quiet_python_logging() -> None:
    """For a command-line process: py4j and pyspark report a JVM going away through Python logging
    (some of it on the root logger) and version advice through warnings; the command's one-line
    error says enough."""
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    logging.getLogger().setLevel(logging.CRITICAL)
    warnings.simplefilter("ignore")


@contextlib.contextmanager
def job_conf(spark: Any) -> Iterator[None]:
    """Apply :data:`JOB_CONF` to ``spark`` for the length of a job, then restore what it was."""
    before = {key: spark.conf.get(key, None) for key in JOB_CONF}
    for key, value in JOB_CONF.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):  # a JVM that died has no settings left to restore
            for key, value in before.items():
                if value is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, value)
