"""The parts of ingest that need no Spark: the checkpoint state file, key and value encoding, the
bucket layout, and how Spark's failures become one line."""

from __future__ import annotations

import zlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from smart_transfer.ingest.errors import display_path, spark_failure
from smart_transfer.ingest.state import (
    MAX_BUCKET_DEPTH,
    TARGET_KEYS_PER_BUCKET,
    Bucket,
    IngestState,
    StateError,
    db_key,
    db_value,
    decode_value,
    depth_for,
)


@given(st.tuples(st.text(max_size=5), st.text(max_size=5)), st.integers(0, 10), st.integers(0, 10**9))
def test_state_file_round_trips(key: tuple[str, str], depth: int, keys: int) -> None:
    state = IngestState(key, depth, keys, {3: Bucket("000012.sst", "keys-01-00003.parquet", keys)})
    assert IngestState.decode(state.encode()) == state


def test_an_unknown_state_format_is_refused() -> None:
    with pytest.raises(StateError, match="format"):
        IngestState.decode(b'{"format": "other/9", "primary_key": [], "depth": 0, "keys": 0, "buckets": {}}')
    with pytest.raises(StateError, match="unreadable"):
        IngestState.decode(b"{not json")


@given(st.binary(max_size=40), st.integers(-(2**63), 2**63 - 1), st.binary(min_size=32, max_size=32))
def test_keys_sort_by_crc_then_key_and_values_round_trip(key: bytes, offset: int, row_hash: bytes) -> None:
    encoded = db_key(key)
    assert encoded[:4] == zlib.crc32(key).to_bytes(4, "big") and encoded[4:] == key
    assert decode_value(db_value(offset, row_hash)) == (offset, row_hash)


def test_buckets_double_with_the_keys_up_to_the_limit() -> None:
    assert depth_for(0) == depth_for(TARGET_KEYS_PER_BUCKET) == 0
    assert depth_for(TARGET_KEYS_PER_BUCKET + 1) == 1
    assert depth_for(1_000_000) == 9
    assert depth_for(10**12) == MAX_BUCKET_DEPTH


class FakeJava:
    def __init__(self, message: str, cause: FakeJava | None = None) -> None:
        self.message, self.cause = message, cause

    def getMessage(self) -> str:  # noqa: N802 - Java's name
        return self.message

    def getCause(self) -> FakeJava | None:  # noqa: N802 - Java's name
        return self.cause


class FakePy4JError(Exception):
    def __init__(self, java: Any) -> None:
        super().__init__("An error occurred while calling o77.collectToPython.\n\tat org.apache.Foo(...)")
        self.java_exception = java


def test_spark_failures_become_one_line_naming_the_file() -> None:
    java = FakeJava(
        "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file file:///tmp/a%20b.parquet.  SQLSTATE: KD001",
        FakeJava("Expected 1234 bytes, found 12\n\tat org.apache.parquet.Foo"),
    )
    assert str(spark_failure(FakePy4JError(java))) == "/tmp/a b.parquet: Expected 1234 bytes, found 12"
    plain = spark_failure(RuntimeError("[SOMETHING] went wrong SQLSTATE: 42000\nmore"))
    assert str(plain) == "Spark failed: went wrong"
    assert display_path("file:/x/y.csv") == "/x/y.csv" and display_path("s3a://b/k") == "s3a://b/k"
