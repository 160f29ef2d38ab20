"""Predicate hints through a real server: the literals that broke answers (NaN and sNaN against integer
and decimal columns, a time finer than a microsecond) give whole answers with every file that may hold a
matching row, asked by the unmodified ``delta-sharing`` client and by plain HTTP in both response formats
and both hint forms; and literals generated at and around each column's values (the unit test's oracle,
``tests/unit/test_hint_literals.py``) never lose a file, in both formats and both forms."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from delta_sharing.protocol import DeltaSharingProfile, Table
from delta_sharing.rest_client import DataSharingRestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import ServerProcess, run_cli, start_server, summary
from tests.integration.test_security import token
from tests.unit import test_hint_literals as literals

SHARE, SCHEMA, NAME = "smart-transfer", "datasets", "hinted"
#: Every slice holds a row at the last microsecond before the epoch.
LAST_BEFORE_EPOCH = dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC)
#: The columns the table holds (the unit test's names and types) and each slice's values.
COLUMNS = ("i64", "f64", "dec", "text", "day", "at_us")
FORMATS = {"parquet": None, "delta": "responseformat=delta"}


def _slice(index: int) -> dict[str, list[Any]]:
    base = index * 10
    return {
        "offset": [base, base + 1, base + 2],
        "i64": [base - 5, base, 2**53 + base],
        "f64": [base / 3, -0.0, float(base) + 0.5],
        "dec": [decimal.Decimal(base) / 100, decimal.Decimal("-1.01"), decimal.Decimal(base * 7) / 100],
        "text": [f"k{base}", "Zoë", "a" * (60 + index * 4)],
        "day": [dt.date(2024, 1, 1) + dt.timedelta(days=base), dt.date(1969, 12, 31), dt.date(9999, 12, 31)],
        "at_us": [
            int((LAST_BEFORE_EPOCH - literals.EPOCH) / dt.timedelta(microseconds=1)),
            base * 1_000_001,
            -(base + 1) * 37,
        ],
    }


def _table(index: int) -> pa.Table:
    values = _slice(index)
    arrays = {"offset": pa.array(values["offset"], pa.int64())}
    for name in COLUMNS:
        data_type = literals.COLUMNS[name][0]
        raw = pa.array(values[name], pa.int64()).cast(data_type) if name == "at_us" else None
        arrays[name] = raw if raw is not None else pa.array(values[name], data_type)
    return pa.table(arrays)


@dataclass
class Served:
    server: ServerProcess
    token: str
    profile: Path

    def query(self, body: dict[str, Any], fmt: str) -> list[int]:
        """The slices (by index) a query answers with; the answer must be whole (every line JSON, the
        protocol and metaData lines first)."""
        url = f"{self.server.url}/delta-sharing/shares/{SHARE}/schemas/{SCHEMA}/tables/{NAME}/query"
        headers = {"Authorization": f"Bearer {self.token}"}
        if FORMATS[fmt]:
            headers["delta-sharing-capabilities"] = str(FORMATS[fmt])
        answer = httpx.post(url, json=body, headers=headers, timeout=60)
        assert answer.status_code == 200, answer.text
        lines = [orjson.loads(line) for line in answer.text.splitlines()]
        assert [next(iter(line)) for line in lines[:2]] == ["protocol", "metaData"], answer.text[:500]
        kept = []
        for line in lines[2:]:
            fields = line["file"]
            stats = fields["deltaSingleAction"]["add"]["stats"] if fmt == "delta" else fields["stats"]
            kept.append(orjson.loads(stats)["minValues"]["offset"] // 10)
        return sorted(kept)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("hints")
    tokens = root / "tokens.json"
    writer = token(tokens, "writer", "--write", "*")
    server = start_server(root / "server", "--tokens", str(tokens))
    workspace = root / "ws"
    for index in range(3):
        path = root / f"{index}.parquet"
        pq.write_table(_table(index), path)
        assert run_cli("add", NAME, str(path), "--records", "3", workspace=workspace).returncode == 0
    summary(run_cli("push", NAME, f"{server.url}/{NAME}", "--token", writer, "--json", workspace=workspace))
    profile = root / "reader.share"
    made = run_cli(
        "token", "profile", "reader", "--tokens", str(tokens), "--url", server.url, "--read", "*", "-o", str(profile)
    )
    assert made.returncode == 0, made.stderr
    try:
        yield Served(server, writer, profile)
    finally:
        server.stop()


def _leaf(op: str, column: str, value: str, value_type: str | None) -> str:
    literal = {"op": "literal", "value": value, **({"valueType": value_type} if value_type else {})}
    return orjson.dumps({"op": op, "children": [{"op": "column", "name": column}, literal]}).decode()


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_nan_literals_keep_every_file_and_the_answer_whole(served: Served, fmt: str) -> None:
    for column, value_type in (("i64", "long"), ("dec", "long"), ("dec", "decimal"), ("f64", "double")):
        for value in ("NaN", "sNaN", "-NaN", "Infinity"):
            for op in literals.OPS:
                body = {"jsonPredicateHints": _leaf(op, column, value, value_type)}
                assert served.query(body, fmt) == [0, 1, 2], (column, value, op)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_a_time_finer_than_a_microsecond_keeps_the_files_that_match(served: Served, fmt: str) -> None:
    finer = "1969-12-31T23:59:59.9999995Z"  # every slice holds a row at ...59.999999Z, which is before it
    assert served.query({"jsonPredicateHints": _leaf("lessThan", "at_us", finer, "timestamp")}, fmt) == [0, 1, 2]
    for sql in (f"at_us < timestamp '{finer}'", f"at_us < '{finer}'", f"at_us <= timestamp '{finer}'"):
        assert served.query({"predicateHints": [sql]}, fmt) == [0, 1, 2], sql
    later = _leaf("greaterThan", "at_us", "1970-01-01T00:00:05Z", "timestamp")  # exact: slice 0 ends at 0
    assert served.query({"jsonPredicateHints": later}, fmt) == [1, 2]


def test_the_delta_sharing_client_gets_every_file_for_nan_and_finer_times(served: Served) -> None:
    rest = DataSharingRestClient(DeltaSharingProfile.read_from_file(str(served.profile)))
    table = Table(name=NAME, share=SHARE, schema=SCHEMA)
    for hint in (
        _leaf("greaterThan", "i64", "NaN", "long"),
        _leaf("greaterThan", "dec", "sNaN", "decimal"),
        _leaf("lessThan", "at_us", "1969-12-31T23:59:59.9999995Z", "timestamp"),
    ):
        assert len(rest.list_files_in_table(table, jsonPredicateHints=hint).add_files) == 3, hint
    pruned = rest.list_files_in_table(table, predicateHints=["i64 >= 15"]).add_files
    assert len(pruned) == 3  # every slice holds 2**53 + base: a hint that cannot prune keeps all


def _literals() -> list[tuple[str, str]]:
    values = [(column, raw) for index in range(3) for column in COLUMNS for raw in _slice(index)[column]]
    texts = {(column, text) for column, raw in values for text in literals._neighbours(column, raw)}
    return sorted(texts) + [(column, text) for column in COLUMNS for text in literals.SPECIAL if len(text) < 100]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    case=st.sampled_from(_literals()),
    op=st.sampled_from(literals.OPS),
    value_type=st.sampled_from(literals.VALUE_TYPES),
)
def test_generated_literals_never_lose_a_file_through_the_server(
    served: Served, case: tuple[str, str], op: str, value_type: str | None
) -> None:
    column, text = case
    if "\ud800" in text:
        return  # not UTF-8: no JSON body carries it
    slices = [_slice(index)[column] for index in range(3)]
    sql = literals._sql_literal(column, text, value_type)
    sql_type = value_type if value_type in ("date", "timestamp", "string") else "number"
    for fmt in FORMATS:
        kept = served.query({"jsonPredicateHints": _leaf(op, column, text, value_type)}, fmt)
        wanted = [i for i, values in enumerate(slices) if literals._matches(column, values, op, text, value_type)]
        assert set(wanted) <= set(kept), (fmt, column, op, text, value_type, kept)
        if sql is not None:
            kept = served.query({"predicateHints": [f"{column} {literals.SQL_OPS[op]} {sql}"]}, fmt)
            wanted = [i for i, values in enumerate(slices) if literals._matches(column, values, op, text, sql_type)]
            assert set(wanted) <= set(kept), (fmt, column, op, sql, kept)
