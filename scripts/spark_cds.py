"""A class-data-sharing (CDS) archive for the test suite's Spark JVMs: the suite starts dozens of them
(every CLI ingest, every in-process session), and on a 2-core machine each spends 10-40 s loading and
verifying the same few thousand classes from Spark's 280 jars. A JVM mapping the archive starts in about a
third of that time; C1-only compilation and the serial collector suit runs this short.

    scripts/spark_cds.py DIRECTORY

prints the ``SPARK_SUBMIT_OPTS`` value that uses the archive (building it first, once per pyspark and
Java version, by a real ingest with ``-XX:ArchiveClassesAtExit``), or nothing when it cannot be built:
the archive is speed only, never correctness (a JVM ignores an archive that does not match it)."""

from __future__ import annotations

import argparse
import csv
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: JIT and collector settings for short test JVMs (also applied while the archive is dumped).
FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: How long the dumping JVM may take to exit after the warm-up ingest (it writes ~200 MB).
DUMP_SECONDS = 300


def archive_key() -> str:
    """Changes with anything that makes an archive unusable: pyspark's jars, the JVM, the flags."""
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60, check=True).stderr
    return hashlib.sha256(f"{pyspark.__version__}\n{java}\n{FLAGS}".encode()).hexdigest()[:16]


def options(archive: Path) -> str:
    """The JVM options that map ``archive`` (``-Xshare:auto``: a JVM that cannot map it runs without)."""
    return f"-XX:SharedArchiveFile={archive} -Xshare:auto {FLAGS}"


def warm_up(scratch: Path, archive: Path) -> None:
    """Run one keyed CSV ingest in a JVM that dumps the classes it loaded to ``archive`` when it exits."""
    os.environ["SPARK_SUBMIT_OPTS"] = f"-XX:ArchiveClassesAtExit={archive} {FLAGS}"
    from smart_transfer.ingest.api import ingest
    from smart_transfer.ingest.spark import jvm_output, quiet_python_logging, spark_session

    data = scratch / "warm.csv"
    with data.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "name"])
        writer.writerows([i, f"n{i}"] for i in range(20))
    quiet_python_logging()
    with jvm_output(verbose=False):
        spark = spark_session()
    ingest(scratch / "ws", "warm", data, spark=spark, primary_key=["id"])
    process = spark.sparkContext._gateway.proc  # the JVM exits (and dumps) when its stdin closes
    spark.stop()
    process.stdin.close()
    process.wait(timeout=DUMP_SECONDS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, help="where archives are kept (one per pyspark and Java version)")
    directory = parser.parse_args().directory
    partial = directory / f"spark.{os.getpid()}.partial"
    try:
        archive = directory / f"spark-{archive_key()}.jsa"
        if not archive.exists():
            directory.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory() as scratch:
                warm_up(Path(scratch), partial)
            partial.rename(archive)  # a test JVM never maps a half-written archive
    except Exception as exc:  # speed only: the suite runs (slower) without it
        print(f"spark_cds: no archive ({type(exc).__name__}: {exc})", file=sys.stderr)
        partial.unlink(missing_ok=True)
        return 0
    print(options(archive))
    return 0


if __name__ == "__main__":
    sys.exit(main())
