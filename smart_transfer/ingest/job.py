"""The ingest job. Spark reads the input and writes the new rows as one Parquet data slice with a
continuing ``offset`` column; a RocksDB database (the dataset's checkpoint) remembers what was
ingested, so identical input adds nothing:

- with a primary key: key -> (offset, row hash); new keys and changed rows are appended as new
  versions, identical rows are skipped;
- without one: the fingerprint (SHA-256) of each input file; the same file again is a no-op.

Nothing becomes visible until the AddData block commits: the slice and checkpoint files are
content-addressed objects (invisible until referenced), the state is changed in a scratch copy, and
the workspace's checkpoint switches atomically after the commit.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from smart_transfer.checkpoint.files import open_checkpoint, snapshot, store_checkpoint
from smart_transfer.checkpoint.slot import CheckpointSlot
from smart_transfer.ingest.parquet import normalize
from smart_transfer.model import AddData, Checkpoint, DataSlice, ObjectRef, OffsetInterval
from smart_transfer.repo import ObjectKind, Workspace
from smart_transfer.storage.digest import digest_file

FORMATS = ("csv", "json", "parquet")
OFFSET_COLUMN = "offset"
_SOURCE = b"source:"
_KEY = b"key:"


class IngestError(Exception):
    """Bad input or a failed job; the dataset is unchanged."""


@dataclass
class IngestResult:
    """What one ingest did."""

    dataset: str
    rows_read: int
    rows_added: int
    head: str | None
    data_slice: str | None
    checkpoint: str | None
    checkpoint_files_stored: int
    checkpoint_bytes_stored: int

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def detect_format(path: Path, given: str | None) -> str:
    if given is not None:
        if given not in FORMATS:
            raise IngestError(f"unknown format {given!r}; use one of {', '.join(FORMATS)}")
        return given
    suffix = path.suffix.lower().lstrip(".")
    if suffix in ("csv", "parquet"):
        return suffix
    if suffix in ("json", "jsonl", "ndjson"):
        return "json"
    raise IngestError(f"cannot tell the format of {path.name}; give --format csv|json|parquet")


def _input_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith((".", "_")))
        if files:
            return files
    raise IngestError(f"no such input: {path}")


def _fingerprint(files: Sequence[Path]) -> bytes:
    digest = hashlib.sha256()
    for file in files:
        digest.update(digest_file(file).multihash.digest)
    return digest.digest()


def _read(spark: Any, path: Path, fmt: str) -> Any:
    reader = spark.read.option("mode", "FAILFAST")
    if fmt == "csv":
        # every column as text: no type inference that could differ between runs or engines
        return reader.option("header", True).option("enforceSchema", False).csv(str(path))
    if fmt == "json":
        return reader.json(str(path))
    return spark.read.parquet(str(path))


def _spark_error(exc: Exception) -> IngestError:
    text = str(exc)
    first = next((line for line in text.splitlines() if line.strip()), type(exc).__name__)
    for marker in ("Malformed", "malformed", "FAILFAST", "PARSE_SYNTAX", "CANNOT_PARSE"):
        if marker in text:
            return IngestError(f"malformed input: {first.strip()[:300]}")
    return IngestError(f"Spark failed: {first.strip()[:300]}")


def ingest(
    workspace: Workspace,
    dataset_name: str,
    input_path: Path,
    *,
    spark: Any,
    fmt: str | None = None,
    primary_key: Sequence[str] = (),
) -> IngestResult:
    """Ingest ``input_path`` into the dataset; see the module docstring."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention

    dataset = workspace.dataset(dataset_name)
    files = _input_files(Path(input_path))
    fmt = detect_format(files[0] if Path(input_path).is_dir() else Path(input_path), fmt)
    tip = dataset.tip()
    next_offset = tip.next_offset if tip is not None else 0
    slot = CheckpointSlot(workspace.root, dataset.name)
    scratch = Path(tempfile.mkdtemp(prefix=".ingest-", dir=workspace.root))
    try:
        state_dir = scratch / "state"
        if slot.current.exists():
            shutil.copytree(slot.current, state_dir)
        state = open_checkpoint(state_dir)
        try:
            fingerprint = _fingerprint(files)
            if not primary_key and state.get(_SOURCE + fingerprint) is not None:
                return IngestResult(dataset.name, 0, 0, str(tip.head) if tip else None, None, None, 0, 0)
            try:
                frame = _read(spark, Path(input_path), fmt)
                columns = sorted(frame.columns)
                missing = [c for c in primary_key if c not in frame.columns]
                if missing:
                    raise IngestError(
                        f"primary key column(s) {', '.join(missing)} not in the input (columns: {', '.join(columns)})"
                    )
                if OFFSET_COLUMN in frame.columns:
                    raise IngestError(f"the input already has a column named {OFFSET_COLUMN!r}")
                frame = frame.withColumn("_row", F.sha2(F.to_json(F.struct(*columns)), 256))
                frame = frame.withColumn("_order", F.monotonically_increasing_id())
                if primary_key:
                    frame = frame.withColumn("_key", F.to_json(F.struct(*primary_key)))
                    frame = frame.dropDuplicates(["_key", "_row"])
                    pairs = frame.select("_key", "_row").collect()
                    wanted = []
                    for row in pairs:
                        stored = state.get(_KEY + row["_key"].encode())
                        if stored is None or orjson.loads(stored)["row"] != row["_row"]:
                            wanted.append((row["_key"], row["_row"]))
                    rows_read = len(pairs)
                    if not wanted:
                        return IngestResult(
                            dataset.name, rows_read, 0, str(tip.head) if tip else None, None, None, 0, 0
                        )
                    selection = spark.createDataFrame(wanted, ["_key", "_row"])
                    frame = frame.join(F.broadcast(selection), ["_key", "_row"]).orderBy("_key", "_row")
                else:
                    rows_read = frame.count()
                    if rows_read == 0:
                        return IngestResult(dataset.name, 0, 0, str(tip.head) if tip else None, None, None, 0, 0)
                    frame = frame.orderBy("_order")
                new_rows = frame.rdd.zipWithIndex().map(lambda pair: (pair[1], *tuple(pair[0])))
                with_offset = spark.createDataFrame(new_rows, [OFFSET_COLUMN, *frame.columns])
                with_offset = with_offset.withColumn(OFFSET_COLUMN, F.col(OFFSET_COLUMN) + F.lit(next_offset))
                output = with_offset.select(OFFSET_COLUMN, *[F.col(c) for c in frame.columns if c in columns])
                out_dir = scratch / "slice"
                output.coalesce(1).write.parquet(str(out_dir))
                keyed = with_offset.select(OFFSET_COLUMN, "_key", "_row").collect() if primary_key else []
            except AnalysisException as exc:
                raise _spark_error(exc) from None
            except IngestError:
                raise
            except Exception as exc:  # py4j surfaces Java failures (malformed rows) as plain exceptions
                raise _spark_error(exc) from None
            written = next(out_dir.glob("part-*.parquet"), None)
            if written is None:
                raise IngestError("Spark wrote no data file")
            part = scratch / "slice.parquet"
            normalize(written, part)
            digest = digest_file(part)
            rows_added = output.count()
            slice_ref = ObjectRef(ObjectKind.DATA, digest.multihash, digest.size)
            if dataset.objects_missing([slice_ref]):
                workspace.local_store.adopt(dataset.object_key(slice_ref), part)
            batch_offset_end = next_offset + rows_added - 1
            if primary_key:
                for row in keyed:
                    state[_KEY + row["_key"].encode()] = orjson.dumps(
                        {"offset": row[OFFSET_COLUMN], "row": row["_row"]}
                    )
            else:
                state[_SOURCE + fingerprint] = orjson.dumps({"start": next_offset, "end": batch_offset_end})
            checkpoint_dir = scratch / "checkpoint"
            snapshot(state, checkpoint_dir)
        finally:
            state.close()
        manifest, stored_files, stored_bytes = store_checkpoint(dataset, checkpoint_dir)
        manifest_hash = manifest.hash()
        event = AddData(
            new_data=DataSlice(
                digest.multihash, digest.size, OffsetInterval(next_offset, batch_offset_end), rows_added
            ),
            new_checkpoint=Checkpoint(manifest_hash, len(manifest.encode())),
        )
        new_tip = dataset.append([event])
        slot.directory.mkdir(parents=True, exist_ok=True)
        destination = slot.path_for(manifest_hash)
        if not destination.exists():
            checkpoint_dir.rename(destination)
        slot.switch_to(manifest_hash)
        return IngestResult(
            dataset.name,
            rows_read,
            rows_added,
            str(new_tip.head),
            str(digest.multihash),
            str(manifest_hash),
            stored_files,
            stored_bytes,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
