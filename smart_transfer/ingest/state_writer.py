"""Building the next key-mode checkpoint without the driver holding keys (layout: ``state.py``).

Executors write the buckets a run touched: each bucket's entries arrive at one Python worker as
Arrow arrays, are sorted by RocksDB key there, and become one SST file (rocksdict's SstFileWriter)
and one mirror Parquet file. The driver then creates an empty database and ingests every bucket's
SST, the new ones and the untouched previous ones, which RocksDB links in unchanged: non-overlapping
files go to the last level as they are, so an untouched bucket's file keeps its bytes and its hash.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.rdd import PythonEvalType
from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention
from pyspark.sql.pandas.functions import arrow_udf
from rocksdict import IngestExternalFileOptions, Options, Rdict, SstFileWriter

from smart_transfer.checkpoint.files import link_or_copy, snapshot
from smart_transfer.ingest.dedup import KEY, KEY_HASH, ROW_HASH
from smart_transfer.ingest.state import (
    SOURCE_PREFIX,
    STATE_FILE,
    Bucket,
    IngestState,
    db_key,
    db_value,
    mirror_name,
    sst_name,
)
from smart_transfer.model.events import OFFSET_COLUMN

BUCKET = "__st_bucket"
_MIRROR_ARROW = pa.schema(
    [("key", pa.binary(), False), ("offset", pa.int64(), False), ("row_hash", pa.binary(), False)]
)


def bucket_of(key_hash: Any, depth: int) -> Any:
    """The bucket of a key: the top ``depth`` bits of its 32-bit hash."""
    return F.shiftrightunsigned(key_hash, 32 - depth) if depth else F.lit(0).cast("long")


def entries(previous: Any, added: Any, depth: int) -> Any:
    """Every entry of the buckets to write: the added rows' keys plus the ``previous`` entries (of
    those buckets) that they do not replace."""
    new = added.select(KEY, KEY_HASH, OFFSET_COLUMN, ROW_HASH).withColumn(BUCKET, bucket_of(F.col(KEY_HASH), depth))
    old = previous.withColumn(KEY_HASH, F.crc32(F.col(KEY)))
    kept = old.withColumn(BUCKET, bucket_of(F.col(KEY_HASH), depth)).join(new.select(KEY), KEY, "left_anti")
    return kept.select(KEY, KEY_HASH, OFFSET_COLUMN, ROW_HASH, BUCKET).unionByName(new)


def write_bucket(directory: str, depth: int, buckets: Any, hashes: Any, keys: Any, offsets: Any, rows: Any) -> int:
    """Executor side: one bucket's entries (Arrow arrays) -> its SST and mirror files. Returns the
    number of keys. Files are written under a temporary name and renamed, so a retried task is safe."""
    bucket = int(buckets[0].as_py())
    table = pa.table({"h": hashes, "key": keys, "offset": offsets, "row_hash": rows})
    table = table.sort_by([("h", "ascending"), ("key", "ascending")])  # RocksDB's bytewise key order
    sst_path = os.path.join(directory, sst_name(depth, bucket))
    writer = SstFileWriter(Options(raw_mode=True))
    writer.open(sst_path + ".tmp")
    columns = (table.column(name).to_pylist() for name in ("key", "offset", "row_hash"))
    for key, offset, row_hash in zip(*columns, strict=True):
        writer[db_key(key)] = db_value(offset, row_hash)
    writer.finish()
    mirror_path = os.path.join(directory, mirror_name(depth, bucket))
    mirror = pa.table([table.column(n) for n in ("key", "offset", "row_hash")], schema=_MIRROR_ARROW)
    pq.write_table(mirror, mirror_path + ".tmp", compression="snappy", use_dictionary=False)
    os.replace(sst_path + ".tmp", sst_path)
    os.replace(mirror_path + ".tmp", mirror_path)
    return int(table.num_rows)


def write_buckets(frame: Any, directory: Path, depth: int) -> dict[int, int]:
    """Write every bucket present in ``frame`` (see :func:`entries`) into ``directory``; returns
    bucket -> keys (one small line per bucket reaches the driver, never a key)."""
    target = str(directory)

    def write(buckets: pa.Array, hashes: pa.Array, keys: pa.Array, offsets: pa.Array, rows: pa.Array) -> int:
        return write_bucket(target, depth, buckets, hashes, keys, offsets, rows)

    with warnings.catch_warnings():  # pyspark prefers type hints; mypy prefers the explicit kind
        warnings.simplefilter("ignore", UserWarning)
        write_udf = arrow_udf(write, "long", PythonEvalType.SQL_GROUPED_AGG_ARROW_UDF)

    written = frame.groupBy(BUCKET).agg(
        write_udf(F.col(BUCKET), F.col(KEY_HASH), F.col(KEY), F.col(OFFSET_COLUMN), F.col(ROW_HASH)).alias("keys")
    )
    return {int(row[BUCKET]): int(row["keys"]) for row in written.collect()}


def _bucket_of_db_key(key: bytes, depth: int) -> int:
    return int.from_bytes(key[:4], "big") >> (32 - depth) if depth else 0


def assemble_sources(previous_dir: Path | None, fingerprints: list[bytes], work: Path, destination: Path) -> None:
    """Append mode: the previous checkpoint plus ``source:<fingerprint>`` for each new input."""
    database = work / "db"
    if previous_dir is not None:
        shutil.copytree(previous_dir, database)  # small: one key per input ever ingested
    db = Rdict(str(database), Options(raw_mode=True))
    try:
        for fingerprint in fingerprints:
            db[SOURCE_PREFIX + fingerprint] = b""
        snapshot(db, destination)
    finally:
        db.close()
    (destination / STATE_FILE).write_bytes(IngestState(()).encode())


def assemble(
    previous: IngestState | None,
    previous_dir: Path | None,
    written: dict[int, int],
    state: IngestState,
    work: Path,
    destination: Path,
) -> IngestState:
    """Driver side: the new checkpoint at ``destination`` from the buckets just written (in ``work``)
    and the previous checkpoint's untouched ones. Returns the state it records."""
    staged = work / "ingest"
    staged.mkdir()
    sst_paths: list[str] = []
    mirrors: dict[int, Path] = {}
    for bucket in sorted(set(written) | set(previous.buckets if previous and previous.depth == state.depth else ())):
        if bucket in written:
            sst_paths.append(str(work / sst_name(state.depth, bucket)))
            mirrors[bucket] = work / mirror_name(state.depth, bucket)
        else:  # untouched: the previous files, linked (RocksDB moves its own link into the database)
            assert previous is not None and previous_dir is not None
            old = previous.buckets[bucket]
            link_or_copy(previous_dir / old.sst, staged / f"carried-{bucket:05d}.sst")
            sst_paths.append(str(staged / f"carried-{bucket:05d}.sst"))
            mirrors[bucket] = previous_dir / old.mirror
    db = Rdict(str(work / "db"), Options(raw_mode=True))
    try:
        options = IngestExternalFileOptions()
        options.set_move_files(True)
        if sst_paths:
            db.ingest_external_file(sst_paths, options)
        names = {_bucket_of_db_key(f["start_key"], state.depth): f["name"].lstrip("/") for f in db.live_files()}
        snapshot(db, destination)
    finally:
        db.close()
    buckets = {}
    for bucket, mirror in mirrors.items():
        link_or_copy(mirror, destination / mirror.name)
        keys = written.get(bucket) or (previous.buckets[bucket].keys if previous else 0)
        buckets[bucket] = Bucket(names[bucket], mirror.name, keys)
    recorded = IngestState(state.primary_key, state.depth, sum(b.keys for b in buckets.values()), buckets)
    (destination / STATE_FILE).write_bytes(recorded.encode())
    return recorded
