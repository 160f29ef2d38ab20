"""The inputs of one run: paths (local or any URI Spark reads), their formats, and, for local
files, fingerprints that let append mode recognise an input it already ingested. No Spark here."""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from smart_transfer.ingest.errors import IngestError

FORMATS = ("csv", "json", "parquet")


@dataclass(frozen=True, slots=True)
class Input:
    """One input of a run: a file or a directory of files, a local path or any URI Spark reads."""

    path: str
    fmt: str
    index: int

    @property
    def uri(self) -> str:
        return self.path if "://" in self.path else str(Path(self.path).absolute())


def detect_format(path: str, given: str | None) -> str:
    """``given``, or the format the file name says; a directory is named by its first file."""
    if given is not None:
        if given not in FORMATS:
            raise IngestError(f"unknown format {given!r}; use one of {', '.join(FORMATS)}")
        return given
    files = local_files(path)
    name = files[0].name if files else path.rstrip("/")
    suffix = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if suffix in ("csv", "parquet"):
        return suffix
    if suffix in ("json", "jsonl", "ndjson"):
        return "json"
    raise IngestError(f"cannot tell the format of {path}; give --format csv|json|parquet")


def local_files(path: str) -> list[Path] | None:
    """The files Spark reads for a local ``path`` (a directory: recursively, skipping hidden and
    ``_``-prefixed names as Spark does), in path order; None for a URI."""
    if "://" in path:
        return None
    local = Path(path)
    if local.is_file():
        return [local]
    if local.is_dir():
        files = sorted(
            p
            for p in local.rglob("*")
            if p.is_file() and not any(part.startswith((".", "_")) for part in p.relative_to(local).parts)
        )
        if files:
            return files
        raise IngestError(f"{path}: no files in this directory")
    raise IngestError(f"no such input: {path}")


def resolve_inputs(paths: Sequence[str | Path], fmt: str | None) -> list[Input]:
    """The inputs of an ingest, each with its format; IngestError when none is given, a local one is
    missing or an empty directory (with or without ``fmt``: checked before anything is created), a
    format cannot be told, or a local CSV input has no header (all before a JVM starts)."""
    if not paths:
        raise IngestError("no input given")
    if fmt is not None:  # without it, detect_format looks for each local input as it tells the format
        for path in paths:
            local_files(str(path))
    items = [Input(str(p), detect_format(str(p), fmt), i) for i, p in enumerate(paths)]
    for item in items:
        if item.fmt == "csv":
            local_csv_header(item)
    return items


def checked_header(item: Input, header: list[str]) -> list[str]:
    """``header`` of a CSV input, or IngestError when it is empty, a column has no name, or two names
    differ only in case (Spark's column names are case-insensitive)."""
    if not header:
        raise IngestError(f"{item.path}: empty input (no header, no records)")
    unnamed = [str(i + 1) for i, name in enumerate(header) if not name]
    if unnamed:
        raise IngestError(f"{item.path}: column(s) {', '.join(unnamed)} of the header have no name")
    folded = [name.lower() for name in header]
    repeated = sorted({name for name in header if folded.count(name.lower()) > 1})
    if repeated:
        raise IngestError(f"{item.path}: column name(s) {', '.join(repeated)} appear more than once in the header")
    return header


def local_csv_header(item: Input) -> list[str] | None:
    """The checked header of a local CSV input: the first record of its first file, read with Python's
    csv module (the same RFC 4180 rules Spark's reader follows, without a Spark job); None for a URI."""
    files = local_files(item.path)
    if files is None:
        return None
    with files[0].open(newline="", encoding="utf-8", errors="replace") as handle:
        return checked_header(item, next(csv.reader(handle), []))


def fingerprint(item: Input) -> bytes | None:
    """SHA-256 over the content hashes of an input's files (None for a URI: not fingerprinted)."""
    files = local_files(item.path)
    if files is None:
        return None
    digest = hashlib.sha256(item.fmt.encode())
    for file in files:
        with file.open("rb") as handle:
            digest.update(hashlib.file_digest(handle, "sha256").digest())
    return digest.digest()
