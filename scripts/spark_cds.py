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
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: JIT and collector settings for short test JVMs (also applied while the archive is dumped).
FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: How long the dumping JVM may take to exit after the warm-up ingest (it writes ~200 MB).
DUMP_SECONDS = 300


def archive_key() -> str:
    """Changes with anything that makes an archive unusable: the JVM, the flags, and Spark's jars (the
    JVM checks each jar's path, size and modification time, so a reinstalled pyspark needs a new one)."""
    import pyspark

    java = shutil.which("java") or "java"
    version = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60, check=True).stderr
    digest = hashlib.sha256(f"{os.path.realpath(java)}\n{version}\n{FLAGS}\n".encode())
    for jar in sorted((Path(pyspark.__file__).resolve().parent / "jars").iterdir()):
        stat = jar.stat()
        digest.update(f"{jar}\t{stat.st_size}\t{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def options(archive: Path) -> str:
    """The JVM options that map ``archive`` (``-Xshare:auto``: a JVM that cannot map it runs without,
    and ``-Xlog:cds*=off`` keeps it from saying so on its stdout)."""
    return f"-XX:SharedArchiveFile={archive} -Xshare:auto -Xlog:cds*=off {FLAGS}"


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
    with jvm_output(verbose=False) as log:
        spark = spark_session()
    process = spark.sparkContext._gateway.proc
    try:
        ingest(scratch / "ws", "warm", data, spark=spark, primary_key=["id"])
        spark.stop()
        process.stdin.close()  # the JVM exits (and dumps) when its stdin closes
        process.wait(timeout=DUMP_SECONDS)
    finally:
        if process.poll() is None:  # a failed warm-up: a killed JVM dumps nothing
            process.kill()
            process.wait(timeout=60)
        if log is not None:
            log.unlink(missing_ok=True)


def clear_stale(directory: Path, keep: Path) -> None:
    """Remove archives of other keys (~200 MB each) and partial ones whose builder is gone."""
    for old in directory.glob("spark-*.jsa"):
        if old != keep:
            old.unlink(missing_ok=True)
    for partial in directory.glob("spark.*.partial"):
        pid = partial.name.split(".")[1]
        if not pid.isdigit() or not Path(f"/proc/{pid}").exists():
            partial.unlink(missing_ok=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, help="where archives are kept (one per pyspark and Java version)")
    directory = parser.parse_args().directory
    partial = directory / f"spark.{os.getpid()}.partial"
    try:
        archive = directory / f"spark-{archive_key()}.jsa"
        if not archive.exists():
            directory.mkdir(parents=True, exist_ok=True)
            clear_stale(directory, archive)
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
