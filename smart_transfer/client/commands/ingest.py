"""``smart-transfer ingest``: the command line of the Spark ingest job (Spark is imported only when
the command runs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from smart_transfer.client.commands.common import Commands, add_parser, add_workspace_option, open_workspace, print_json
from smart_transfer.client.errors import CliError


def run_ingest(args: argparse.Namespace) -> int:
    from smart_transfer.ingest.job import IngestError, ingest
    from smart_transfer.ingest.spark import SparkUnavailable, spark_session

    key = [c.strip() for c in args.primary_key.split(",") if c.strip()] if args.primary_key else []
    if not Path(args.input).exists():
        raise CliError(f"no such input: {args.input}")
    with open_workspace(args) as workspace:
        dataset = workspace.dataset(args.dataset)  # validates the name before Spark starts
        try:
            spark = spark_session(args.master)
            try:
                result = ingest(
                    workspace, dataset.name, Path(args.input), spark=spark, fmt=args.format, primary_key=key
                )
            finally:
                spark.stop()
        except (IngestError, SparkUnavailable) as exc:
            raise CliError(str(exc)) from None
    if args.json:
        print_json(result.to_dict())
    elif result.rows_added == 0:
        print(f"{result.dataset}: nothing new in {args.input} ({result.rows_read} row(s) read); dataset unchanged")
    else:
        print(
            f"{result.dataset}: added {result.rows_added} of {result.rows_read} row(s) as slice {result.data_slice}; "
            f"checkpoint stored {result.checkpoint_files_stored} new file(s) ({result.checkpoint_bytes_stored} bytes); "
            f"head {result.head}"
        )
    return 0


def register(commands: Commands) -> None:
    ingest = add_parser(
        commands,
        "ingest",
        help="ingest CSV, JSON or Parquet into a dataset with Spark",
        description="Spark reads the input and appends the new rows as one Parquet data slice with a continuing "
        "'offset' column, plus a RocksDB checkpoint of what was ingested: with --primary-key, unchanged rows are "
        "skipped and changed rows appended as new versions; without, the same input file is a no-op. "
        "Runs in local mode by default; --master spark://HOST:7077 (or yarn, k8s://...) runs the same job "
        "on a cluster.",
    )
    ingest.add_argument("dataset", metavar="DATASET")
    ingest.add_argument("--input", required=True, help="a file or a directory of files")
    ingest.add_argument(
        "--format", choices=("csv", "json", "parquet"), default=None, help="default: from the file name"
    )
    ingest.add_argument("--primary-key", default=None, metavar="COL[,COL]", help="columns identifying a row")
    ingest.add_argument("--master", default="local[2]", help="Spark master URL")
    ingest.add_argument("--json", action="store_true", help="print one JSON summary object")
    add_workspace_option(ingest)
    ingest.set_defaults(handler=run_ingest)
