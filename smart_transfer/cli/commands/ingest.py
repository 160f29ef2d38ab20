"""``smart-transfer ingest``: the CLI over :func:`smart_transfer.ingest.api.ingest`. One run starts one
JVM for all its inputs; Spark's own output goes to a temporary log unless ``--verbose``. Imports no
Spark until it runs, so the rest of the CLI works without the ``spark`` extra."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Any

from smart_transfer.cli.commands.common import (
    add_dataset_argument,
    add_parser,
    add_workspace_option,
    open_workspace,
    print_json,
)
from smart_transfer.cli.exits import EXIT_USAGE, CliError
from smart_transfer.ingest.inputs import FORMATS

DEFAULT_MASTER = "local[2]"  # the same as smart_transfer.ingest.spark, which imports pyspark lazily only
DESCRIPTION = (
    "Spark reads the inputs (CSV as RFC 4180 with a header, JSON lines, or Parquet; several in one run, "
    "one after the other) and appends the new rows as one Parquet data slice with a continuing 'offset' "
    "column in input order, plus a RocksDB checkpoint of what was ingested. With --primary-key, rows whose "
    "key is new or whose content changed are added and identical rows skipped; within a run the last "
    "occurrence of a key wins. Without a key every row is added and an input already ingested is skipped. "
    "The first ingest records the dataset's schema; later ones must match it. Runs in local mode by "
    "default; --master spark://HOST:7077 (or yarn, k8s://...) runs the same job on a cluster."
)


def register(subparsers: Any) -> None:
    """Add the ``ingest`` command to the CLI's subparsers."""
    parser = add_parser(
        subparsers, "ingest", help="ingest CSV, JSON or Parquet into a dataset with Spark", description=DESCRIPTION
    )
    add_dataset_argument(parser)
    parser.add_argument(
        "--input",
        dest="inputs",
        action="extend",
        nargs="+",
        required=True,
        metavar="PATH",
        help="a file or a directory of files, local or a URI Spark reads; several (or --input repeated) "
        "are read in that order as one run",
    )
    parser.add_argument("--format", choices=FORMATS, default=None, help="default: from each input's file name")
    parser.add_argument("--primary-key", default=None, metavar="COL[,COL]", help="columns identifying a row")
    parser.add_argument(
        "--schema",
        default=None,
        metavar="DDL",
        help="column types as Spark DDL, e.g. 'id INT, name STRING, amount DECIMAL(10,2)' (default: CSV all "
        "text, JSON inferred, Parquet its own; later ingests: the dataset's recorded schema)",
    )
    parser.add_argument("--master", default=DEFAULT_MASTER, help="Spark master URL")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    parser.add_argument("--json", action="store_true", help="print one JSON summary object")
    parser.add_argument("--verbose", action="store_true", help="show Spark's own output (JVM and log lines)")
    add_workspace_option(parser)
    parser.set_defaults(handler=run_command)


def _spark_conf(pairs: list[str]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--conf expects KEY=VALUE, got {pair!r}", EXIT_USAGE)
        conf[key.strip()] = value
    return conf


def _report(result: Any, as_json: bool) -> None:
    if as_json:
        print_json(result.to_dict())
        return
    for path in result.inputs_already_ingested:
        print(f"{result.dataset}: {path} was ingested before; skipped")
    if result.rows_added == 0:
        print(f"{result.dataset}: nothing new ({result.rows_read} row(s) read); dataset unchanged")
        return
    schema = "; schema recorded" if result.schema_recorded else ""
    print(
        f"{result.dataset}: added {result.rows_added} of {result.rows_read} row(s) as slice {result.data_slice}"
        f"{schema}; checkpoint stored {result.checkpoint_files_stored} new file(s) "
        f"({result.checkpoint_bytes_stored} bytes); head {result.head}"
    )


def _stop(spark: Any) -> None:
    """Stop the session; a JVM that already died has nothing left to stop."""
    with contextlib.suppress(Exception):
        spark.stop()


def _why_it_died(log: Path | None, message: str) -> str:
    """Spark reports a JVM that ran out of memory as a stopped context; its log says why."""
    if log is None or not log.exists():
        return message
    with log.open(errors="replace") as handle:
        if any("java.lang.OutOfMemoryError" in line for line in handle):
            return (
                "Spark ran out of memory (java.lang.OutOfMemoryError); give it more, e.g. --conf spark.driver.memory=4g"
            )
    return message


def run_command(args: argparse.Namespace) -> int:
    """The ``ingest`` handler: every failure is a CliError (one line, exit 1)."""
    from smart_transfer.ingest.api import ingest
    from smart_transfer.ingest.errors import IngestError
    from smart_transfer.ingest.inputs import resolve_inputs
    from smart_transfer.ingest.spark import SparkUnavailable, jvm_output, quiet_python_logging, spark_session

    key = [c.strip() for c in args.primary_key.split(",") if c.strip()] if args.primary_key else []
    conf = _spark_conf(args.conf)
    try:
        resolve_inputs(args.inputs, args.format)  # a missing file is named before a JVM starts
    except IngestError as exc:
        raise CliError(str(exc)) from None
    if not args.verbose:
        quiet_python_logging()
    with open_workspace(args) as workspace:
        dataset = workspace.dataset(args.dataset)  # validates the name before Spark starts
        log: Path | None = None
        try:
            with jvm_output(args.verbose) as log:
                spark = spark_session(args.master, conf=conf, verbose=args.verbose)
            try:
                result = ingest(
                    workspace,
                    dataset.name,
                    args.inputs,
                    spark=spark,
                    format=args.format,
                    primary_key=key,
                    schema=args.schema,
                )
            finally:
                _stop(spark)
        except (IngestError, SparkUnavailable) as exc:
            raise CliError(_why_it_died(log, str(exc))) from None
        finally:
            if log is not None:
                log.unlink(missing_ok=True)
    _report(result, args.json)
    return 0
