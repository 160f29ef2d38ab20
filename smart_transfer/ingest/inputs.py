"""The inputs of one run: paths (local or any URI Spark reads), their formats, and, for local
files, fingerprints that let append mode recognise an input it already ingested. No Spark here."""

from __future__ import annotations

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
    missing or an empty directory (with or without ``fmt``: checked before anything is created), or a
    format cannot be told."""
    if not paths:
        raise IngestError("no input given")
    if fmt is not None:  # without it, detect_format looks for each local input as it tells the format
        for path in paths:
            local_files(str(path))
    return [Input(str(p), detect_format(str(p), fmt), i) for i, p in enumerate(paths)]


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
