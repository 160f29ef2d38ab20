"""Ingest with PySpark: input files -> a typed Parquet data slice + AddData (+ SetDataSchema the
first time) + a RocksDB checkpoint. ``from smart_transfer.ingest import ingest`` runs it on a
SparkSession you pass in; the ``ingest`` CLI command starts one. Importing this needs no pyspark."""

from smart_transfer.ingest.api import IngestResult, ingest
from smart_transfer.ingest.errors import IngestError

__all__ = ["IngestError", "IngestResult", "ingest"]
