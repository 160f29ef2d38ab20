"""Predicate hints never drop a file that holds a matching row (Hypothesis). For every column type the
statistics know (integers of each width, float32 and float64, decimals, strings, dates, timestamps of
each unit, with and without a zone), slices of generated values are written as real Parquet, their
statistics read from the footers as the server reads them, and literals generated at and around each
value: equal to the minimum and maximum, one unit beyond, beyond the type's precision (half a
microsecond, a third decimal place, a float32 neighbour), special values (NaN, sNaN, infinities, -0,
unicode digits, signs, 5,000 digits), in every value type. Each literal is tried with every comparison,
in both hint forms (the JSON tree, either way round, and the SQL text).

The oracle is this test's own and errs the other way: a literal it cannot pin to one exact value (text
no parser here reads exactly, NaN, a time finer than a microsecond read every way it may be rounded)
matches every row. A file dropped while one of its rows matches is a failure."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import re
import struct
from collections import Counter
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smart_transfer.config.literals import hint_literal
from smart_transfer.repo.footer_stats import SliceStats, footer_stats
from smart_transfer.server.delta_sharing.errors import SharingError
from smart_transfer.server.delta_sharing.hints import json_predicate, sql_predicate

OPS = ("equal", "lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual")
SQL_OPS = {"equal": "=", "lessThan": "<", "lessThanOrEqual": "<=", "greaterThan": ">", "greaterThanOrEqual": ">="}
FLIPPED = {"lessThan": "greaterThan", "lessThanOrEqual": "greaterThanOrEqual", "equal": "equal"}
FLIPPED.update({v: k for k, v in FLIPPED.items()})
VALUE_TYPES = [None, "long", "int", "short", "byte", "double", "float", "decimal", "string", "date", "timestamp"]
VALUE_TYPES += ["timestamp_ntz", "boolean"]
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
SPECIAL = ["NaN", "nan", "sNaN", "-NaN", "Infinity", "-Infinity", "inf", "1e400", "-1e400", "", " ", "-0", "+0"]
SPECIAL += ["0.0", "-0.0", "5e-324", "\u0663", "+5", "5.", ".5", "0x10", "1_000", "9" * 5000, "%00", "../x"]
SPECIAL += ["1969-12-31T23:59:59.9999995Z", "1969-12-31T23:59:59.999999Z", "1970-01-01", "true", "\ud800"]

#: What the test tried, for the summary line and the checks that it covered each kind.
TRIED: Counter[str] = Counter()


def _ints(bits: int) -> st.SearchStrategy[int]:
    edge = 2 ** (bits - 1)
    edges = [v for v in (-edge, edge - 1, 0, 1, -1, 2**24, 2**24 + 1, 2**53 + 1) if -edge <= v < edge]
    return st.one_of(st.integers(-edge, edge - 1), st.sampled_from(edges))


def _times(unit: str) -> st.SearchStrategy[int]:
    """Raw values of a timestamp column of ``unit`` (around the epoch, the microsecond edges, far away)."""
    scale = {"s": 1, "ms": 1000, "us": 10**6, "ns": 10**9}[unit]
    near = st.integers(-3 * scale, 3 * scale)
    return st.one_of(near, st.integers(-(10**9) * scale // 1000, 10**9 * scale // 1000), st.sampled_from([-1, 0, 1]))


#: Column name -> (Arrow type, values strategy): every type whose footers give statistics.
COLUMNS: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "i8": (pa.int8(), _ints(8)),
    "i16": (pa.int16(), _ints(16)),
    "i32": (pa.int32(), _ints(32)),
    "i64": (pa.int64(), _ints(64)),
    "f32": (
        pa.float32(),
        st.one_of(
            st.floats(width=32, allow_infinity=False), st.sampled_from([0.1, 16777216.0, 16777218.0, math.nan, -0.0])
        ).map(lambda v: struct.unpack("f", struct.pack("f", v))[0]),
    ),
    "f64": (pa.float64(), st.one_of(st.floats(allow_infinity=False), st.sampled_from([0.1, 2.0**53, math.nan, -0.0]))),
    "dec": (pa.decimal128(12, 2), st.decimals(-(10**9), 10**9, places=2, allow_nan=False, allow_infinity=False)),
    "dec38": (pa.decimal128(38, 0), st.integers(-(10**37), 10**37).map(decimal.Decimal)),
    "text": (pa.string(), st.text(st.characters(exclude_categories=("Cs",)), max_size=8) | st.text("ab", max_size=70)),
    "day": (pa.date32(), st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31))),
    "at_us": (pa.timestamp("us", tz="UTC"), _times("us")),
    "at_ns": (pa.timestamp("ns", tz="UTC"), _times("ns")),
    "at_ms": (pa.timestamp("ms", tz="UTC"), _times("ms")),
    "at_s": (pa.timestamp("s", tz="UTC"), _times("s")),
    "local_us": (pa.timestamp("us"), _times("us")),
}


def _footer_stats(column: str, values: list[Any]) -> SliceStats:
    """A slice of ``values`` written as Parquet, its statistics read from its footer as the server does."""
    data_type = COLUMNS[column][0]
    array = pa.array(values, pa.int64()).cast(data_type) if pa.types.is_timestamp(data_type) else None
    table = pa.table({column: array if array is not None else pa.array(values, data_type)})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return footer_stats(pq.ParquetFile(pa.BufferReader(sink.getvalue())).metadata)


# ---- the oracle: each literal read every way it may be meant, exactly ----

_DECIMAL_TEXT = re.compile(r"\s*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*")
_MOMENT_TEXT = re.compile(r"\s*([0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2})?)?)(?:\.([0-9]+))?(.*)")
ALL = None  # the literal's value is not pinned down: every row matches


def _float32(value: float) -> float | None:
    try:
        narrow = float(struct.unpack("f", struct.pack("f", value))[0])
    except OverflowError:
        return None
    if not math.isfinite(narrow):  # past the largest float32 yet rounded to infinity, not refused
        return None
    return narrow


def _numbers(text: str, column: str, value_type: str | None) -> list[Any] | None:
    """Every exact value a number literal may be taken for: its decimal value; as a double when it is
    one (an exponent, a floating value type) or the column is; as a float32 when the column or the value
    type is one (SQL casts a literal to a float column's type)."""
    values: list[Any] = []
    if _DECIMAL_TEXT.fullmatch(text) and len(text) < 400:
        values.append(Fraction(decimal.Decimal(text.strip())))
    try:
        as_float = float(text)  # also unicode digits, underscores, nan and inf: a reading some client may make
    except ValueError:
        as_float = None
    floating = column.startswith("f") or value_type in ("float", "double") or "e" in text.lower()
    if as_float is not None and (floating or not values):
        if not math.isfinite(as_float):
            return ALL
        values.append(Fraction(as_float))
        narrow = _float32(as_float)
        if narrow is not None and (column == "f32" or value_type == "float"):
            values.append(Fraction(narrow))
    return values or ALL


def _micros(text: str, zoned: bool) -> list[Fraction] | None:
    """Every exact microsecond count a time literal may be taken for (None: any)."""
    found = _MOMENT_TEXT.fullmatch(text)
    if found is None:
        return ALL
    try:
        moment = dt.datetime.fromisoformat(found[1] + (found[3] or ""))
    except ValueError:
        return ALL
    if (moment.tzinfo is not None) != zoned:
        return ALL
    origin = EPOCH if zoned else EPOCH.replace(tzinfo=None)
    whole = Fraction((moment - origin) // dt.timedelta(microseconds=1))
    return [whole + Fraction(int(found[2]), 10 ** len(found[2])) * 10**6 if found[2] else whole]


def _readings(column: str, text: str, value_type: str | None) -> list[Any] | None:
    """The values the literal may mean against ``column`` (ALL: not pinned to any)."""
    data_type = COLUMNS[column][0]
    if pa.types.is_string(data_type):
        return [text]
    if pa.types.is_date32(data_type):
        try:
            return [dt.date.fromisoformat(text)] if re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text) else ALL
        except ValueError:
            return ALL
    if pa.types.is_timestamp(data_type):
        return _micros(text, data_type.tz is not None)
    return _numbers(text, column, value_type)


def _row_value(column: str, raw: Any) -> Any:
    """A row's value as the oracle compares it (times in exact microseconds; NaN kept as NaN)."""
    data_type = COLUMNS[column][0]
    if pa.types.is_timestamp(data_type):
        return Fraction(raw * {"s": 10**6, "ms": 1000, "us": 1, "ns": Fraction(1, 1000)}[data_type.unit])
    if isinstance(raw, decimal.Decimal):
        return Fraction(raw)
    if isinstance(raw, float) and math.isfinite(raw):
        return Fraction(raw)
    return raw


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "equal": lambda a, b: a == b,
    "lessThan": lambda a, b: a < b,
    "lessThanOrEqual": lambda a, b: a <= b,
    "greaterThan": lambda a, b: a > b,
    "greaterThanOrEqual": lambda a, b: a >= b,
}


def _matches(column: str, values: list[Any], op: str, text: str, value_type: str | None) -> bool:
    """Whether any row of the slice holds ``column op literal`` under some reading of the literal (NaN
    rows: greater than every number, as SQL orders them)."""
    readings = _readings(column, text, value_type)
    for raw in values:
        if raw is None:
            continue
        if isinstance(raw, float) and math.isnan(raw):
            if op in ("greaterThan", "greaterThanOrEqual") or readings is ALL:
                return True
            continue
        if readings is ALL or any(_COMPARE[op](_row_value(column, raw), reading) for reading in readings):
            return True
    return False


# ---- the literals: at and around every value the slices hold ----


def _neighbours(column: str, raw: Any) -> list[str]:
    """The literal texts at and around one value: equal, one unit beyond, finer than the type."""
    data_type = COLUMNS[column][0]
    if raw is None:
        return []
    if pa.types.is_timestamp(data_type):
        micros = _row_value(column, raw)
        texts = []
        for step in (0, 1, -1, Fraction(1, 2), -Fraction(1, 2), Fraction(1, 1000)):
            moment = micros + step
            whole = math.floor(moment)
            base = (EPOCH + dt.timedelta(microseconds=whole)).replace(tzinfo=None)
            finer = str(int((moment - whole) * 1000)).rjust(3, "0").rstrip("0") if moment != whole else ""
            text = base.isoformat(timespec="microseconds") + finer
            texts.append(text + ("Z" if data_type.tz is not None else ""))
        return texts
    if pa.types.is_date32(data_type):
        return [(raw + dt.timedelta(days=d)).isoformat() for d in (0, 1, -1) if dt.date.min < raw < dt.date.max]
    if pa.types.is_string(data_type):
        return [raw, raw + "\0", raw[:-1], raw + "a", raw.upper()]
    if isinstance(raw, float):
        if not math.isfinite(raw):
            return ["NaN"]
        texts = [repr(raw), repr(math.nextafter(raw, math.inf)), repr(math.nextafter(raw, -math.inf))]
        return [*texts, repr(raw + 1), f"{decimal.Decimal(raw)}", f"{decimal.Decimal(raw)}1"]
    unit = decimal.Decimal(1) if isinstance(raw, int) else decimal.Decimal("0.01")
    value = decimal.Decimal(raw)
    return [str(value), str(value + unit), str(value - unit), str(value + unit / 10), f"{value}e0", f"{value}.5"]


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, list[list[Any]], str, str, str | None]:
    """A column, three slices of its values, a literal, a comparison and a value type."""
    column = draw(st.sampled_from(sorted(COLUMNS)))
    values = COLUMNS[column][1]
    slices = [draw(st.lists(values | st.none(), min_size=1, max_size=5)) for _ in range(3)]
    around = [text for chunk in slices for raw in chunk for text in _neighbours(column, raw)]
    text = draw(st.sampled_from(around) if around and draw(st.booleans()) else st.sampled_from(SPECIAL))
    return column, slices, text, draw(st.sampled_from(OPS)), draw(st.sampled_from(VALUE_TYPES))


def _sql_literal(column: str, text: str, value_type: str | None) -> str | None:
    """The literal in the SQL form (None: SQL cannot write it)."""
    quoted = "'" + text.replace("'", "''") + "'"
    if value_type in ("date", "timestamp"):
        return f"{value_type} {quoted}"
    if value_type == "string":
        return quoted
    return text.strip() if re.fullmatch(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?", text.strip()) else None


def _always(stats: SliceStats) -> bool:
    return True


def _json(column: str, op: str, text: str, value_type: str | None, flipped: bool) -> str:
    literal = {"op": "literal", "value": text, **({"valueType": value_type} if value_type else {})}
    operands = [{"op": "column", "name": column}, literal]
    tree = {"op": FLIPPED[op], "children": operands[::-1]} if flipped else {"op": op, "children": operands}
    return json.dumps(tree)  # a lone surrogate as its escape, which the server refuses as not JSON


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(), flipped=st.booleans())
def test_no_hint_drops_a_file_that_holds_a_matching_row(
    case: tuple[str, list[list[Any]], str, str, str | None], flipped: bool
) -> None:
    column, slices, text, op, value_type = case
    stats = [_footer_stats(column, values) for values in slices]
    try:
        json_form = json_predicate(_json(column, op, text, value_type, flipped))
    except SharingError as refused:  # a refused query drops nothing silently: the client is told
        assert refused.status == 400 and "\ud800" in text
        json_form = _always
    sql_text = _sql_literal(column, text, value_type)
    sql_form = sql_predicate([f"{column} {SQL_OPS[op]} {sql_text}"]) if sql_text is not None else None
    # SQL's literal carries no value type of its own but its quoting: an unquoted number is read as written
    sql_type = value_type if value_type in ("date", "timestamp", "string") else "number"
    TRIED.update([f"column {column}", f"value type {value_type}", "literal"])
    for values, numbers in zip(slices, stats, strict=True):
        if _matches(column, values, op, text, value_type):
            assert json_form(numbers), (column, values, op, text, value_type, flipped)
            TRIED["kept a matching file"] += 1
        if sql_form is not None and _matches(column, values, op, text, sql_type):
            assert sql_form(numbers), (column, values, op, sql_text)
            TRIED["kept a matching file (SQL)"] += 1


def test_the_generated_literals_reached_every_column_and_value_type() -> None:
    if not TRIED:
        pytest.skip("runs after the generated test, in the same process")
    assert {f"column {name}" for name in COLUMNS} <= set(TRIED), TRIED
    assert {f"value type {kind}" for kind in VALUE_TYPES} <= set(TRIED), TRIED
    assert TRIED["kept a matching file"] > 100 and TRIED["kept a matching file (SQL)"] > 100


@pytest.mark.parametrize(
    ("kind", "text", "value_type"),
    [
        ("int", "NaN", "long"),
        ("decimal", "NaN", "long"),
        ("int", "sNaN", "long"),
        ("decimal", "sNaN", "decimal"),
        ("float", "NaN", "double"),
        ("float", "Infinity", "double"),
        ("int", "Infinity", None),
        ("int", "5.5", "long"),
        ("int", "3000000000", "int"),
        ("int", "1e3", "number"),
        ("int", "\u0663", "long"),
        ("int", "9" * 5000, "long"),
        ("float", "0.1", "double"),
        ("float", "16777217", "long"),
        ("decimal", "1" * 39, "decimal"),
        ("timestamp", "1969-12-31T23:59:59.9999995Z", "timestamp"),
        ("timestamp", "1969-12-31T23:59:59", "timestamp"),
        ("timestamp_ntz", "1969-12-31T23:59:59Z", "timestamp"),
        ("date", "2024-01-01T10:00:00", "timestamp"),
        ("date", "2024-02-30", "date"),
        ("string", "\ud800", "string"),
        ("string", "5", "long"),
    ],
)
def test_literals_that_do_not_compare_exactly_are_unknown(kind: str, text: str, value_type: str | None) -> None:
    assert hint_literal(kind, text, value_type) is None


@pytest.mark.parametrize(
    ("kind", "text", "value_type", "value"),
    [
        ("int", "12", "long", decimal.Decimal(12)),
        ("int", " -7 ", "int", decimal.Decimal(-7)),
        ("int", "5.5", "number", decimal.Decimal("5.5")),
        ("decimal", "1.005", "decimal", decimal.Decimal("1.005")),
        ("float", "0.5", "double", decimal.Decimal("0.5")),
        ("float", "16777216", "long", decimal.Decimal(16777216)),
        ("date", "2024-02-29", "date", dt.date(2024, 2, 29)),
        ("timestamp", "1969-12-31T23:59:59.999999Z", "timestamp", -1),
        ("timestamp", "1970-01-01 01:00:00+01:00", "timestamp", 0),
        ("timestamp_ntz", "1970-01-01T00:00:00.000001", "timestamp_ntz", 1),
        ("string", " a'b ", "string", " a'b "),
    ],
)
def test_literals_that_compare_exactly_have_their_exact_value(
    kind: str, text: str, value_type: str | None, value: object
) -> None:
    assert hint_literal(kind, text, value_type) == value
