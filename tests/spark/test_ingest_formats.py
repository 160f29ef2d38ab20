"""Inputs come back exactly: CSV as Python's csv module writes it, typed Parquet, JSON lines. Values
and types are read back with pyarrow and compared with the input; offsets follow input order."""

from __future__ import annotations

import csv
import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from smart_transfer.ingest import ingest
from smart_transfer.model import DataField, SetDataSchema, decode_block
from smart_transfer.repo import Workspace
from tests.spark.data import dataset_table, rows, write_csv, write_jsonl

AWKWARD_TEXT = [
    'He said "hi, there" ok',
    'He said "hi"',
    "ends with a backslash\\",
    '\\"backslash then quote',
    "two\nlines",
    "comma, inside",
    "ünïcødé ✓ 日本語",
    "",
    "   spaces kept   ",
    '"',
    "#not a comment",
]


def recorded_schema(workspace: Workspace, name: str) -> SetDataSchema:
    dataset = workspace.dataset(name)
    for block_hash, _ in dataset.blocks_after(dataset.require_tip(), None):
        event = decode_block(dataset.block_bytes(block_hash)).event
        if isinstance(event, SetDataSchema):
            return event
    raise AssertionError("no SetDataSchema block")


def test_csv_written_by_pythons_csv_module_comes_back_exactly(spark: Any, tmp_path: Path) -> None:
    data = [(str(i), text, str(i * 7)) for i, text in enumerate(AWKWARD_TEXT)]
    path = write_csv(tmp_path / "awkward.csv", data, header=("id", "text, with comma", 'say "x"'))
    with path.open(newline="", encoding="utf-8") as handle:
        header, *expected = list(csv.reader(handle))
    with Workspace(tmp_path / "ws") as ws:
        result = ingest(ws, "csv", path, spark=spark)
        assert (result.rows_read, result.rows_added, result.schema_recorded) == (len(data), len(data), True)
        table = dataset_table(ws, "csv")
        assert table.column_names == ["offset", *header]
        assert table.schema.field("offset").type == pa.int64() and not table.schema.field("offset").nullable
        assert all(table.schema.field(name).type == pa.string() for name in header)
        assert table.column("offset").to_pylist() == list(range(len(data)))
        assert [[r[c] for c in header] for r in table.to_pylist()] == expected
        assert recorded_schema(ws, "csv").fields == (
            DataField("offset", "BIGINT", False),
            DataField("id", "STRING"),
            DataField("text, with comma", "STRING"),
            DataField('say "x"', "STRING"),
        )


def typed_table() -> pa.Table:
    utc = dt.UTC
    return pa.table(
        {
            "i32": pa.array([1, None, -(2**31), 2**31 - 1], pa.int32()),
            "f32": pa.array([1.5, None, float("inf"), -0.0], pa.float32()),
            "dec": pa.array([Decimal("1.23"), None, Decimal("-99999999.99"), Decimal("0.01")], pa.decimal128(10, 2)),
            "ts": pa.array(
                [
                    dt.datetime(2024, 1, 31, 12, 0, 0, 123456, tzinfo=utc),
                    None,
                    dt.datetime(1969, 7, 20, 20, 17, tzinfo=utc),
                    dt.datetime(2262, 1, 1, tzinfo=utc),
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "text": pa.array(["a", None, "", "ü"], pa.string()),
            "all_null": pa.array([None, None, None, None], pa.int64()),
            "day": pa.array([dt.date(2020, 2, 29), None, dt.date(1, 1, 1), dt.date(9999, 12, 31)], pa.date32()),
            "flag": pa.array([True, False, None, True], pa.bool_()),
            "raw": pa.array([b"\x00\xff", None, b"", b"x"], pa.binary()),
            "i8": pa.array([1, None, -128, 127], pa.int8()),
        }
    )


def test_typed_parquet_keeps_every_type_and_value(spark: Any, tmp_path: Path) -> None:
    source = typed_table()
    path = tmp_path / "typed.parquet"
    pq.write_table(source, path)
    with Workspace(tmp_path / "ws") as ws:
        ingest(ws, "typed", path, spark=spark)
        table = dataset_table(ws, "typed")
        assert table.column("offset").to_pylist() == [0, 1, 2, 3]
        back = table.drop_columns(["offset"])
        assert back.schema.equals(source.schema, check_metadata=False)
        assert back.equals(source)
        types = {f.name: f.type for f in recorded_schema(ws, "typed").fields}
        assert types["i32"] == "INT" and types["f32"] == "FLOAT" and types["dec"] == "DECIMAL(10,2)"
        assert types["ts"] == "TIMESTAMP" and types["i8"] == "TINYINT" and types["all_null"] == "BIGINT"
        # a second slice whose rows are all null in a column is fine: the type comes from the file
        more = tmp_path / "more.parquet"
        pq.write_table(source.slice(1, 1), more)
        assert ingest(ws, "typed", more, spark=spark).rows_added == 1
        assert (
            dataset_table(ws, "typed").drop_columns(["offset"]).equals(pa.concat_tables([source, source.slice(1, 1)]))
        )


def test_json_lines_keep_inferred_types_and_the_order_keys_first_appear(spark: Any, tmp_path: Path) -> None:
    records = [
        {"zeta": 1, "alpha": "x", "mid": 1.5},
        {"zeta": 2, "alpha": 'ü "quoted"\nnext', "mid": None, "late": True},
        {"alpha": "no zeta", "zeta": None, "mid": -2.25, "late": False},
    ]
    path = write_jsonl(tmp_path / "in.jsonl", records)
    with Workspace(tmp_path / "ws") as ws:
        ingest(ws, "json", path, spark=spark)
        table = dataset_table(ws, "json")
        assert table.column_names == ["offset", "zeta", "alpha", "mid", "late"]  # not sorted by name
        assert [table.schema.field(n).type for n in table.column_names] == [
            pa.int64(),
            pa.int64(),
            pa.string(),
            pa.float64(),
            pa.bool_(),
        ]
        expected = [{"offset": i, "late": None, **r} for i, r in enumerate(records)]
        assert table.to_pylist() == [{k: e[k] for k in table.column_names} for e in expected]


def test_offsets_follow_input_order_across_inputs_files_and_splits(spark: Any, tmp_path: Path) -> None:
    # a directory of Parquet files with many small row groups, read in several splits per file
    directory = tmp_path / "parts"
    directory.mkdir()
    total = 0
    for part in range(3):
        values = list(range(total, total + 5000))
        pq.write_table(
            pa.table({"n": pa.array(values, pa.int64())}), directory / f"p{part}.parquet", row_group_size=500
        )
        total += len(values)
    last = write_csv(tmp_path / "last.csv", [(str(total + i),) for i in range(10)], header=("n",))
    spark.conf.set("spark.sql.files.maxPartitionBytes", "4096")
    try:
        with Workspace(tmp_path / "ws") as ws:
            ingest(ws, "ordered", [directory], spark=spark)
            ingest(ws, "ordered", [last], spark=spark, schema="n BIGINT")
            table = dataset_table(ws, "ordered")
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert table.column("offset").to_pylist() == list(range(total + 10))
    assert table.column("n").to_pylist() == list(range(total + 10))


def test_several_inputs_are_one_run_in_the_order_given(spark: Any, tmp_path: Path) -> None:
    b = write_csv(tmp_path / "b.csv", [("b1", "x", "1"), ("b2", "y", "2")])
    a = write_csv(tmp_path / "a.csv", [("a1", "z", "3")])
    with Workspace(tmp_path / "ws") as ws:
        result = ingest(ws, "two", [b, a], spark=spark)
        assert (result.rows_read, result.rows_added, result.inputs) == (3, 3, [str(b), str(a)])
        assert [(r["offset"], r["id"]) for r in rows(ws, "two")] == [(0, "b1"), (1, "b2"), (2, "a1")]
        assert ws.dataset("two").require_tip().sequence_number == 2  # Seed, SetDataSchema, one AddData


def test_csv_with_a_schema_is_typed_and_later_csv_reads_with_the_recorded_schema(spark: Any, tmp_path: Path) -> None:
    first = write_csv(tmp_path / "1.csv", [("1", "1.50", "2024-01-31 12:00:00"), ("2", "", "")], ("id", "amount", "at"))
    second = write_csv(tmp_path / "2.csv", [("2.50", "3", "2024-02-01 00:00:00")], ("amount", "id", "at"))
    with Workspace(tmp_path / "ws") as ws:
        ingest(ws, "typed", first, spark=spark, schema="id INT, amount DECIMAL(10,2), at TIMESTAMP")
        ingest(ws, "typed", second, spark=spark)  # header in another order, no --schema: recorded types
        table = dataset_table(ws, "typed")
        assert [table.schema.field(n).type for n in ("id", "amount", "at")] == [
            pa.int32(),
            pa.decimal128(10, 2),
            pa.timestamp("us", tz="UTC"),
        ]
        assert table.column("id").to_pylist() == [1, 2, 3]
        assert table.column("amount").to_pylist() == [Decimal("1.50"), None, Decimal("2.50")]
        assert table.column("at").to_pylist()[2] == dt.datetime(2024, 2, 1, tzinfo=dt.UTC)


def test_slice_bytes_depend_on_the_rows_only_not_on_sparks_row_groups(tmp_path: Path) -> None:
    from smart_transfer.ingest.parquet import ROW_GROUP_ROWS, normalize

    rows = ROW_GROUP_ROWS * 2 + 17
    table = pa.table({"offset": pa.array(range(rows), pa.int64()), "v": [f"value {i % 1000}" for i in range(rows)]})
    outputs = []
    for groups in (1000, 99_999, rows):
        source, target = tmp_path / f"in-{groups}.parquet", tmp_path / f"out-{groups}.parquet"
        pq.write_table(table, source, row_group_size=groups)
        normalize(source, target)
        outputs.append(target.read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]
    written = pq.ParquetFile(tmp_path / "out-1000.parquet")
    assert [written.metadata.row_group(i).num_rows for i in range(3)] == [ROW_GROUP_ROWS, ROW_GROUP_ROWS, 17]
    assert written.schema_arrow.field("v").nullable and not written.schema_arrow.field("offset").nullable
