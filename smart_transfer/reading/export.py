"""``export``: the selected records of a workspace dataset written as CSV, JSON lines or Parquet, in
chain order, one slice at a time (memory holds one slice's selected rows, not the dataset). A file is
written under a temporary name and renamed when complete, so a failed export leaves no partial file
and does not touch an existing one; devices and FIFOs are written in place (see ``output.py``)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

import orjson
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from smart_transfer.errors import LocalError
from smart_transfer.model.versions import Range
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.reading.dataset import LocalDataset, Selection
from smart_transfer.reading.output import open_output

FORMATS = ("csv", "jsonl", "parquet")
#: The format a file name implies when none is given.
SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".parquet": "parquet"}


def json_default(value: Any) -> Any:
    """JSON for what orjson does not know: decimals as exact text, bytes as base64, anything else as text."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return str(value)


def json_rows(table: pa.Table) -> Iterator[bytes]:
    """Each row of ``table`` as one line of JSON (newline included)."""
    for batch in table.to_batches():
        for row in batch.to_pylist():
            yield orjson.dumps(row, default=json_default, option=orjson.OPT_APPEND_NEWLINE)


def format_of(out: str, given: str | None) -> str:
    """The export format: ``given``, or the one ``out``'s suffix implies."""
    if given is not None:
        return given
    found = SUFFIXES.get(Path(out).suffix.lower())
    if found is None:
        raise LocalError(
            ErrorCode.INVALID_REQUEST, f"cannot tell the format from {out!r}; give --format csv|jsonl|parquet"
        )
    return found


@dataclass
class ExportSummary:
    dataset: str
    head: str
    format: str
    output: str
    records: int = 0
    slices: int = 0

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class TableWriter:
    """Writes tables of one schema to a binary sink in one format (``export``'s, and the web view's CSV
    downloads: one dialect and encoding). CSV refuses nested columns (LocalError InvalidRequest)."""

    def __init__(self, sink: IO[bytes], fmt: str, schema: pa.Schema) -> None:
        self.sink = sink
        self.fmt = fmt
        self.writer: Any = None
        if fmt == "csv":
            nested = [f"{f.name} ({f.type})" for f in schema if pa.types.is_nested(f.type)]
            if nested:
                raise LocalError(
                    ErrorCode.INVALID_REQUEST,
                    f"CSV cannot hold nested column(s) {', '.join(nested)}; export as jsonl or parquet",
                )
            self.writer = pa_csv.CSVWriter(sink, schema)
        elif fmt == "parquet":
            self.writer = pq.ParquetWriter(sink, schema, compression="snappy")

    def write(self, table: pa.Table) -> None:
        """Append ``table``'s rows."""
        if self.fmt == "jsonl":
            self.sink.writelines(json_rows(table))
        else:
            self.writer.write_table(table)

    def close(self) -> None:
        """Finish the output (a Parquet footer); the sink stays open."""
        if self.writer is not None:
            self.writer.close()


def export(
    dataset: LocalDataset,
    out: str,
    fmt: str,
    *,
    offsets: Range | None = None,
    blocks: Range | None = None,
) -> ExportSummary:
    """Write the selected records to ``out`` (``-``: standard output) as ``fmt``."""
    if fmt not in FORMATS:
        raise LocalError(ErrorCode.INVALID_REQUEST, f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    selection = dataset.select(offsets=offsets, blocks=blocks)
    summary = ExportSummary(dataset.name, dataset.head, fmt, out, slices=len(selection.entries))
    with open_output(out) as sink:
        _write(sink, fmt, dataset, selection, summary)
    return summary


def _write(sink: IO[bytes], fmt: str, dataset: LocalDataset, selection: Selection, summary: ExportSummary) -> None:
    schema = dataset.schema(selection)
    writer = TableWriter(sink, fmt, schema)
    try:
        for table in dataset.tables(selection, schema):
            writer.write(table)
            summary.records += len(table)
    finally:
        writer.close()
