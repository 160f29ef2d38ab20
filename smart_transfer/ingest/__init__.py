"""Ingest with PySpark: input files -> a typed Parquet data slice + AddData (+ SetDataSchema the
first time) + a RocksDB checkpoint. ``from smart_transfer.ingest import ingest`` runs it on a
SparkSession you pass in; the ``ingest`` CLI command starts one. Importing this needs no pyspark, and
the names below load on first use, so the command line's start-up does not pay for them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from smart_transfer.ingest.api import IngestResult, ingest
    from smart_transfer.ingest.errors import IngestError

__all__ = ["IngestError", "IngestResult", "ingest"]
_HOMES = {"IngestError": "errors", "IngestResult": "api", "ingest": "api"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # each name loads its module on first use (the CLI's --help imports this package)
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{_HOMES[name]}"), name)
