"""Delta Sharing's pure parts: the table-name mapping, Spark JSON schemas from recorded DDL types and
from Arrow, the offset hints, page tokens, the profile file, and a recorded SetDataSchema served as the
table's schema (on a real embedded store)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from smart_transfer.config import SettingError
from smart_transfer.model import DataField, SetDataSchema, SetInfo
from smart_transfer.model.names import DATASET_NAME_PATTERN
from smart_transfer.reading.output import open_output
from smart_transfer.repo import Repository
from smart_transfer.repo.footer import sql_type
from smart_transfer.repo.footer_stats import ColumnStats, SliceStats
from smart_transfer.server.delta_sharing.errors import SharingError
from smart_transfer.server.delta_sharing.hints import json_predicate, prune, sql_predicate
from smart_transfer.server.delta_sharing.naming import dataset_name, dataset_of_table, is_share, table_name
from smart_transfer.server.delta_sharing.profile import profile_bytes, sharing_profile
from smart_transfer.server.delta_sharing.responses import MAX_RESULTS, page
from smart_transfer.server.delta_sharing.spark_schema import (
    UnsupportedSchema,
    schema_of_fields,
    spark_type_of_ddl,
)
from smart_transfer.server.delta_sharing.tables import Tables, parse_timestamp
from smart_transfer.server.settings import ServerSettings
from smart_transfer.storage.base import MAX_URL_TTL_SECONDS
from smart_transfer.storage.local import LocalStore


@given(st.from_regex(DATASET_NAME_PATTERN, fullmatch=True).filter(lambda n: len(n) <= 100))
def test_every_dataset_name_has_one_loadable_table_name(name: str) -> None:
    table = table_name(name)
    assert "." not in table  # the client splits profile#share.schema.table on "."
    assert dataset_name(table) == name


def test_names_match_without_regard_to_ascii_case() -> None:
    datasets = ["Sales.eu", "sales.eu", "Orders"]
    assert dataset_of_table("sales__eu", datasets) == "sales.eu"  # spelled so: that one
    assert dataset_of_table("ORDERS", datasets) == "Orders"
    assert dataset_of_table("ORDERS", ["Orders-x"]) is None
    with pytest.raises(SharingError, match="differ only by case"):
        dataset_of_table("SALES__EU", datasets)
    assert "\u212aey".lower() == "key" and dataset_of_table("\u212aey", ["key"]) is None  # the Kelvin sign
    assert is_share("Smart-TRANSFER") and not is_share("smart_transfer")


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("2022-01-01T00:00:00Z", 1640995200000),
        ("2022-1-1 00:00:00", 1640995200000),
        ("2022-01-01 01:30:00.5+01:30", 1640995200500),
        ("2022-01-01t00:00:00.123456789z", 1640995200123),
        ("9999-12-31T23:59:59.999999Z", 253402300799999),
    ],
)
def test_timestamps_in_the_protocols_formats(text: str, millis: int) -> None:
    assert parse_timestamp(text) == millis


@pytest.mark.parametrize(
    "text",
    [
        "2022-01-01",
        "2022-01-01T00:00Z",
        "2022-02-30 00:00:00",
        "0001-01-01T00:00:00+01:00",
        "2022-01-01T00:00:00+01:75",
    ],
)
def test_what_is_no_timestamp_is_refused(text: str) -> None:
    with pytest.raises(SharingError, match="not a timestamp"):
        parse_timestamp(text)


@pytest.mark.parametrize(
    ("ddl", "spark"),
    [
        ("BIGINT", "long"),
        ("INT", "integer"),
        ("SMALLINT", "short"),
        ("TINYINT", "byte"),
        ("BOOLEAN", "boolean"),
        ("FLOAT", "float"),
        ("DOUBLE", "double"),
        ("STRING", "string"),
        ("VARCHAR(10)", "string"),
        ("BINARY", "binary"),
        ("DATE", "date"),
        ("TIMESTAMP", "timestamp"),
        ("TIMESTAMP_NTZ", "timestamp_ntz"),
        ("DECIMAL(10,2)", "decimal(10,2)"),
        ("decimal(38, 0)", "decimal(38,0)"),
        ("ARRAY<STRING>", {"type": "array", "elementType": "string", "containsNull": True}),
        (
            "MAP<STRING, ARRAY<INT>>",
            {
                "type": "map",
                "keyType": "string",
                "valueType": {"type": "array", "elementType": "integer", "containsNull": True},
                "valueContainsNull": True,
            },
        ),
        (
            "STRUCT<a: INT, `b c`: DECIMAL(5,1) NOT NULL>",
            {
                "type": "struct",
                "fields": [
                    {"name": "a", "type": "integer", "nullable": True, "metadata": {}},
                    {"name": "b c", "type": "decimal(5,1)", "nullable": False, "metadata": {}},
                ],
            },
        ),
    ],
)
def test_recorded_spark_types_become_spark_json_types(ddl: str, spark: object) -> None:
    assert spark_type_of_ddl(ddl) == spark


@pytest.mark.parametrize("ddl", ["INTERVAL DAY", "VOID", "ARRAY<", "DECIMAL(10,2) extra", "STRUCT<a INT"])
def test_types_without_an_equivalent_are_refused(ddl: str) -> None:
    with pytest.raises(UnsupportedSchema):
        spark_type_of_ddl(ddl)


def test_parquet_footer_types_become_spark_json_types() -> None:
    schema = pa.schema(
        [
            pa.field("offset", pa.int64(), nullable=False),
            pa.field("at", pa.timestamp("us", tz="UTC")),
            pa.field("local", pa.timestamp("ms")),
            pa.field("amount", pa.decimal128(12, 2)),
            pa.field("tags", pa.list_(pa.string())),
            pa.field("attrs", pa.map_(pa.string(), pa.int32())),
        ]
    )
    fields = schema_of_fields([DataField(f.name, sql_type(f.type), f.nullable) for f in schema])["fields"]
    assert [(f["name"], f["nullable"]) for f in fields][:2] == [("offset", False), ("at", True)]
    assert [f["type"] for f in fields[1:4]] == ["timestamp", "timestamp_ntz", "decimal(12,2)"]
    assert fields[4]["type"]["elementType"] == "string"
    assert fields[5]["type"]["keyType"] == "string" and fields[5]["type"]["valueType"] == "integer"


def _files(*spans: tuple[int, int]) -> list[SliceStats]:
    """Slices whose ``offset`` spans ``spans`` and whose ``color`` is unknown."""
    return [
        SliceStats(
            end - start + 1,
            {"offset": ColumnStats("int", start, end, 0), "color": ColumnStats("string", None, None, None)},
        )
        for start, end in spans
    ]


def _leaf(op: str, column: str, value: str) -> dict[str, object]:
    return {
        "op": op,
        "children": [{"op": "column", "name": column, "valueType": "long"}, {"op": "literal", "value": value}],
    }


def _kept(files: list[SliceStats], predicate: object, limit: int | None = None) -> list[int]:
    test = json_predicate(orjson.dumps(predicate).decode()) if predicate is not None else None
    return [i + 1 for i in prune(list(range(len(files))), files, test, limit)]


def test_predicates_on_footer_statistics_and_limits_prune_files() -> None:
    files = _files((0, 9), (10, 19), (20, 29), (30, 39))
    between = {
        "op": "and",
        "children": [_leaf("greaterThan", "offset", "12"), _leaf("lessThanOrEqual", "offset", "25")],
    }
    assert _kept(files, between) == [2, 3]
    either = {"op": "or", "children": [_leaf("equal", "offset", "5"), _leaf("greaterThanOrEqual", "offset", "38")]}
    assert _kept(files, either) == [1, 4]
    assert _kept(files, _leaf("equal", "amount", "5")) == [1, 2, 3, 4]  # no statistics: every file stays
    assert _kept(files, {"op": "not", "children": [_leaf("equal", "offset", "5")]}) == [1, 2, 3, 4]
    flipped = {"op": "lessThan", "children": [{"op": "literal", "value": "35"}, {"op": "column", "name": "OFFSET"}]}
    assert _kept(files, flipped) == [4]  # 35 < offset, the name matched without regard to case
    sql = sql_predicate(["offset >= 30", "color = 'red'", "offset <> 3"])
    assert [i + 1 for i in prune(list(range(4)), files, sql, None)] == [4]
    assert _kept(files, None, 11) == [1, 2] and _kept(files, None, 0) == []
    assert _kept(files, between, 1) == [2, 3]  # with a predicate, a limit keeps every file that may match


def test_float_bounds_never_skip_a_file_for_nan() -> None:
    files = [SliceStats(3, {"x": ColumnStats("float", 1.0, 2.0, 0)})]
    assert _kept(
        files,
        {
            "op": "greaterThan",
            "children": [{"op": "column", "name": "x"}, {"op": "literal", "value": "5", "valueType": "double"}],
        },
    ) == [1]
    assert (
        _kept(
            files,
            {
                "op": "lessThan",
                "children": [{"op": "column", "name": "x"}, {"op": "literal", "value": "0.5", "valueType": "double"}],
            },
        )
        == []
    )


@pytest.mark.parametrize("text", ["{", '{"op": 3}', '{"op": "and", "children": []}', '{"op": "equal"}', "[]"])
def test_malformed_json_predicates_are_refused(text: str) -> None:
    with pytest.raises(SharingError) as caught:
        json_predicate(text)
    assert caught.value.status == 400 and caught.value.code == "INVALID_PARAMETER_VALUE"


def test_pages_resume_after_their_token_and_refuse_bad_ones() -> None:
    names = [f"t{i}" for i in range(5)]
    first, token = page("tables", names, 2, None)
    second, token2 = page("tables", names, 2, token)
    third, last = page("tables", names, 2, token2)
    assert (first, second, third, last) == (["t0", "t1"], ["t2", "t3"], ["t4"], "")
    for size in (-1, MAX_RESULTS + 1):
        with pytest.raises(SharingError):
            page("tables", names, size, None)
    none, resume = page("tables", names, 0, token)  # 0: no items, and the token of the page not given
    assert none == [] and page("tables", names, 2, resume) == (["t2", "t3"], token2)
    assert page("tables", names, 0, None)[1] != "" and page("tables", [], 0, None) == ([], "")
    for bad in ("%%%", token.replace("=", "") + "x", page("shares", ["s", "t"], 1, None)[1]):
        with pytest.raises(SharingError):
            page("tables", names, 2, bad)


def test_a_profile_names_the_sharing_endpoint_and_the_token(tmp_path: Path) -> None:
    profile = sharing_profile("https://data.example.com/", "st_secret")
    assert profile == {
        "shareCredentialsVersion": 1,
        "endpoint": "https://data.example.com/delta-sharing",
        "bearerToken": "st_secret",
    }
    with open_output(str(tmp_path / "p.share"), mode=0o600) as sink:
        sink.write(profile_bytes(profile))
    assert orjson.loads((tmp_path / "p.share").read_bytes()) == profile
    assert oct((tmp_path / "p.share").stat().st_mode & 0o777) == "0o600"
    with pytest.raises(ValueError, match="not a server URL"):
        sharing_profile("data.example.com", "st_secret")


def test_a_recorded_schema_is_the_tables_schema(tmp_path: Path) -> None:
    repository = Repository(LocalStore(tmp_path / "store"), tmp_path / "index")
    try:
        recorded = (DataField("offset", "BIGINT", False), DataField("price", "DECIMAL(10,2)", True))
        repository.dataset("shop.orders").append([SetDataSchema(recorded)])
        tables = Tables(repository)
        history = tables.history("shop.orders")
        assert history.latest == 1 and list(history.files(0, 1)) == []
        assert tables.schema(history, 1)["fields"] == [
            {"name": "offset", "type": "long", "nullable": False, "metadata": {}},
            {"name": "price", "type": "decimal(10,2)", "nullable": True, "metadata": {}},
        ]
        repository.dataset("shop.orders").append([SetInfo("orders", ())])
        grown = tables.history("shop.orders")  # only the new block is decoded; the rest is kept
        assert grown.latest == 2 and grown.versions[:2] == history.versions and grown.head != history.head
        with pytest.raises(SharingError) as caught:
            tables.history("no-such")
        assert caught.value.status == 404
    finally:
        repository.close()


def test_the_sharing_url_lifetime_is_bounded_by_the_stores_longest() -> None:
    assert ServerSettings().sharing_url_ttl == 3600
    assert ServerSettings(sharing_url_ttl_seconds=MAX_URL_TTL_SECONDS).sharing_url_ttl == MAX_URL_TTL_SECONDS
    with pytest.raises(SettingError, match=r"--sharing-url-ttl must be 1\.\.604800 seconds"):
        ServerSettings(sharing_url_ttl_seconds=10**9)


def _compare(op: str, column: str, value: str, value_type: str) -> dict[str, object]:
    literal = {"op": "literal", "value": value, "valueType": value_type}
    return {"op": op, "children": [{"op": "column", "name": column, "valueType": value_type}, literal]}


def test_footer_statistics_are_safe_bounds_in_the_delta_shape(tmp_path: Path) -> None:
    import datetime as dt
    import decimal

    import pyarrow.parquet as pq

    from smart_transfer.repo.footer import file_footer
    from smart_transfer.repo.footer_stats import MAX_STRING_BOUND, footer_stats

    long_text = "z" * (MAX_STRING_BOUND + 1)
    table = pa.table(
        {
            "n": pa.array([3, None, -2], pa.int32()),
            "amount": pa.array([decimal.Decimal("1.25"), decimal.Decimal("-0.50"), None], pa.decimal128(6, 2)),
            "word": ["b", long_text, None],
            "day": pa.array([dt.date(1900, 1, 1), dt.date(9999, 12, 31), None]),
            "at": pa.array([1_500_001, -1, None], pa.timestamp("ns", tz="UTC")),
            "flag": [True, False, None],
            "blob": pa.array([b"x", b"y", None]),
            "tags": [["a"], None, []],
        }
    )
    path = tmp_path / "s.parquet"
    pq.write_table(table, path, row_group_size=2)  # two row groups: bounds combine
    stats = footer_stats(file_footer(path))
    delta = orjson.loads(orjson.dumps(stats.to_delta()))
    assert delta["numRecords"] == 3 and set(delta["nullCount"]) == {"n", "amount", "word", "day", "at"}
    assert (delta["minValues"]["n"], delta["maxValues"]["n"], delta["nullCount"]["n"]) == (-2, 3, 1)
    assert (delta["minValues"]["amount"], delta["maxValues"]["amount"]) == (-0.5, 1.25)
    assert delta["minValues"]["word"] == "b" and "word" not in delta["maxValues"]  # too long to say: left out
    assert (delta["minValues"]["day"], delta["maxValues"]["day"]) == ("1900-01-01", "9999-12-31")
    # -1 ns and 1.500001 ms, rounded outwards to the millisecond
    assert (delta["minValues"]["at"], delta["maxValues"]["at"]) == (
        "1969-12-31T23:59:59.999Z",
        "1970-01-01T00:00:00.002Z",
    )
    kept = [
        _kept([stats], _compare("greaterThan", "amount", "1.25", "decimal")),
        _kept([stats], _compare("lessThan", "day", "1900-01-02", "date")),
        _kept([stats], _compare("greaterThan", "at", "1970-01-01T00:00:00.001Z", "timestamp")),
        _kept([stats], _compare("greaterThan", "at", "1970-01-01T00:00:00.003", "timestamp")),  # zone-less: kept
        _kept([stats], _compare("greaterThan", "word", "zz", "string")),  # no maximum: kept
        _kept([stats], _compare("lessThan", "word", "a", "string")),
        _kept([stats], _compare("equal", "n", "x", "long")),  # not a number: kept
        _kept([stats], _compare("equal", "flag", "true", "bool")),  # booleans have no statistics: kept
        _kept([stats], {"op": "isNull", "children": [{"op": "column", "name": "n"}]}),
    ]
    assert kept == [[], [1], [1], [1], [1], [], [1], [1], [1]]
    assert [i for i in prune([1], [stats], sql_predicate(["day < date '1900-01-01'"]), None)] == []
    assert [i for i in prune([1], [stats], sql_predicate(["`n` >= 4"]), None)] == []
    assert [i for i in prune([1], [stats], sql_predicate(["n = '3'"]), None)] == [1]  # a string against a number


def test_a_history_kept_in_pieces_is_the_history_built_from_its_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restarted server reads the pieces of a table's history its index keeps and decodes only the blocks
    after them; a piece that is no longer the chain's is built again."""
    from smart_transfer.model import AddData, DataSlice, Multihash, OffsetInterval
    from smart_transfer.model.events import DataField as Field
    from smart_transfer.server.delta_sharing import history

    monkeypatch.setattr(history, "PIECE_VERSIONS", 8)
    decoded: list[int] = []
    real_decode = history.decode_block
    monkeypatch.setattr(history, "decode_block", lambda data: decoded.append(1) or real_decode(data))
    events: list[object] = [
        AddData(new_data=DataSlice(Multihash.of(b"%d" % i), 10 + i, OffsetInterval(2 * i, 2 * i + 1), 2))
        for i in range(20)
    ]
    events.insert(5, SetDataSchema((Field("offset", "BIGINT", False), Field("a", "INT"))))
    with Repository(LocalStore(tmp_path / "store"), tmp_path / "index") as repository:
        dataset = repository.dataset("kept")
        dataset.append(events)  # type: ignore[arg-type]
        built = history.build_history(dataset, None)  # versions 0..21: pieces 0 and 1 kept
        assert built.latest == 21 and len(built.columns.file_versions) == 20
        kept = dataset.derived_records(history.PIECE_KIND, 0, 2)
        assert kept[0] is not None and kept[1] is not None and kept[2] is None
        decoded.clear()
        again = history.build_history(dataset, None)  # as after a restart: no history in memory
        assert again.columns == built.columns and again.head == built.head
        assert len(decoded) == (22 - 16) + 1  # the blocks after the pieces, and the schema block in piece 0
        assert again.recorded_schema(21) == built.recorded_schema(21) is not None
        wrong = orjson.loads(kept[1] or b"")
        dataset.record_derived(history.PIECE_KIND, [(1, orjson.dumps({**wrong, "last": str(dataset.hash_at(3))}))])
        decoded.clear()
        rebuilt = history.build_history(dataset, None)  # piece 1 is not this chain's: built again from 8 on
        assert rebuilt.columns == built.columns and len(decoded) == (22 - 8) + 1
        assert dataset.derived_records(history.PIECE_KIND, 1, 1)[0] == kept[1]  # and kept again, right


def test_a_listing_reuses_what_it_read_moments_ago_unless_this_server_committed_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Tables.listed``: a dataset read within LISTED_HEAD_MAX_AGE, table or not, is listed without reading
    its head again; older, or moved by a commit through this server (its index), it is read afresh, so a
    table made here shows at once; one made through another replica shows once the age has passed."""
    from smart_transfer.server.delta_sharing import tables as tables_module

    store = LocalStore(tmp_path / "store")
    repository = Repository(store, tmp_path / "index")
    replica = Repository(LocalStore(tmp_path / "store"), tmp_path / "replica-index")  # the same store
    clock = [1000.0]
    monkeypatch.setattr(tables_module.time, "monotonic", lambda: clock[0])
    reads: list[str] = []
    read_ref = store.read_ref
    monkeypatch.setattr(store, "read_ref", lambda key: reads.append(key) or read_ref(key))
    try:
        recorded = (DataField("offset", "BIGINT", False),)
        repository.dataset("shop.orders").append([SetDataSchema(recorded)])
        repository.dataset("shop.later").append([SetInfo("later", ())])  # no schema, no data: no table
        repository.dataset("shop.elsewhere").append([SetInfo("elsewhere", ())])
        tables = Tables(repository)
        first = tables.listed("shop.orders")
        for name in ("shop.later", "shop.elsewhere"):
            with pytest.raises(SharingError):
                tables.listed(name)
        assert len(reads) >= 3  # each head read once
        reads.clear()
        assert tables.listed("shop.orders") is first
        with pytest.raises(SharingError):
            tables.listed("shop.elsewhere")  # no table moments ago: not read again either
        assert reads == []
        repository.dataset("shop.orders").append([SetInfo("orders", ())])
        repository.dataset("shop.later").append([SetDataSchema(recorded)])
        replica.dataset("shop.elsewhere").append([SetDataSchema(recorded)])  # another replica's commit
        clock[0] += tables_module.LISTED_HEAD_MAX_AGE / 2
        assert tables.listed("shop.orders").head != first.head  # committed here since: read again
        assert tables.listed("shop.later").is_table  # was no table, committed here since: a table now
        with pytest.raises(SharingError):
            tables.listed("shop.elsewhere")  # moved elsewhere moments ago: not seen yet
        clock[0] += tables_module.LISTED_HEAD_MAX_AGE
        assert tables.listed("shop.elsewhere").is_table  # too old: read again, a table now
    finally:
        replica.close()
        repository.close()
