"""What a Parquet footer says is what the chain, the web view and Delta Sharing say: ``add`` records the
footer's row count (and refuses a ``--records`` that disagrees), a dataset made with ``add`` has its
slices' schema on its web page and in Delta Sharing's metadata, and predicate hints on any column with
statistics skip files, as the unmodified ``delta-sharing`` client from PyPI sees, never a matching row."""

from __future__ import annotations

import datetime as dt
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import delta_sharing
import httpx
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from delta_sharing.protocol import DeltaSharingProfile, Table
from delta_sharing.rest_client import DataSharingRestClient
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from smart_transfer.cli.main import main as cli_main
from smart_transfer.client import SyncClient
from tests.conftest import ServerProcess, backend_args, run_cli, start_server
from tests.integration.test_delta_sharing import SCHEMA, SHARE, table_url
from tests.integration.test_security import token

COLUMNS = {"id": "long", "name": "string", "day": "date"}
_DAY0 = dt.date(2024, 1, 1)


@dataclass
class Served:
    server: ServerProcess
    tokens: Path
    writer: str
    profile: Path
    root: Path

    def publish(self, name: str, slices: list[pa.Table]) -> None:
        """Add one slice per table (``add`` with no --records: the footers say) and push them."""
        workspace, directory = self.root / f"ws-{name}", self.root / f"in-{name}"
        directory.mkdir(parents=True)
        paths = []
        for i, table in enumerate(slices):
            paths.append(directory / f"{i}.parquet")
            pq.write_table(table, paths[-1])
        assert cli_main(["add", name, *map(str, paths), "--workspace", str(workspace)]) == 0
        with SyncClient(workspace, token=self.writer) as client:
            client.push(name, f"{self.server.url}/{name}")


def _serve(root: Path, backend: str, s3: Any) -> Served:
    tokens = root / "tokens.json"
    writer = token(tokens, "writer", "--write", "*")
    server = start_server(root / "server", "--tokens", str(tokens), *backend_args(backend, s3))
    profile = root / "reader.share"
    made = run_cli(
        "token", "profile", "reader", "--tokens", str(tokens), "--url", server.url, "--read", "*", "-o", str(profile)
    )
    assert made.returncode == 0, made.stderr
    return Served(server, tokens, writer, profile, root)


@pytest.fixture(scope="module")
def hinted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server on the embedded store: every generated dataset of the hint test, and the local case."""
    result = _serve(tmp_path_factory.mktemp("footer-local"), "local", None)
    yield result
    result.server.stop()


@pytest.fixture(scope="module", params=["local", "s3"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    if request.param == "local":
        yield request.getfixturevalue("hinted")
        return
    result = _serve(tmp_path_factory.mktemp("footer-s3"), "s3", request.getfixturevalue("s3_env"))
    yield result
    result.server.stop()


def _rest(profile: Path) -> DataSharingRestClient:
    return DataSharingRestClient(DeltaSharingProfile.read_from_file(str(profile)))


def _add(capsys: pytest.CaptureFixture[str], ws: Path, *args: str) -> tuple[int, str]:
    """``add`` run through the CLI's entry point; its exit code and what it wrote to stderr."""
    code = cli_main(["add", "d", *args, "--workspace", str(ws)])
    return code, capsys.readouterr().err


def test_add_records_the_footers_row_count_and_refuses_a_disagreeing_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seven, blob = tmp_path / "seven.parquet", tmp_path / "blob.bin"
    pq.write_table(pa.table({"id": list(range(7))}), seven)
    blob.write_bytes(b"not parquet")
    ws = tmp_path / "ws"
    code, err = _add(capsys, ws, str(seven), "--records", "2")
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert "--records 2 disagrees with" in err and "(7 rows)" in err
    assert not ws.exists()  # nothing changed: not even a workspace
    assert _add(capsys, ws, str(seven))[0] == 0
    assert _add(capsys, ws, str(seven), "--records", "7")[0] == 0
    assert _add(capsys, ws, str(blob), "--records", "3")[0] == 0
    before = run_cli("log", "d", "--json", workspace=ws).stdout
    assert _add(capsys, ws, str(blob), str(seven), "--records", "3")[0] == 1
    assert run_cli("log", "d", "--json", workspace=ws).stdout == before
    blocks = [orjson.loads(line) for line in before.splitlines()]
    assert [b["new_data"]["num_records"] for b in blocks if b["type"] == "AddData"] == [3, 7, 7]


def test_a_dataset_made_with_add_shows_its_footer_schema_on_its_page_and_in_metadata(served: Served) -> None:
    name = f"made-{secrets.token_hex(3)}"
    table = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "name": ["a", None],
            "amount": pa.array([1, 2], pa.decimal128(10, 2)),
            "at": pa.array([0, 1], pa.timestamp("us", tz="UTC")),
        }
    )
    served.publish(name, [table])
    metadata = _rest(served.profile).query_table_metadata(Table(name=name, share=SHARE, schema=SCHEMA))
    fields = orjson.loads(metadata.metadata.schema_string)["fields"]
    assert [(f["name"], f["type"]) for f in fields] == [
        ("id", "long"),
        ("name", "string"),
        ("amount", "decimal(10,2)"),
        ("at", "timestamp"),
    ]
    page = httpx.get(f"{served.server.url}/ui/datasets/{name}", cookies={"smart_transfer_token": served.writer})
    assert page.status_code == 200 and 'id="no-schema"' not in page.text and 'id="schema-source"' in page.text
    schema_table = page.text[page.text.index('id="schema"') :]
    shown = re.findall(r"<tr><td>([^<]*)</td><td><code>([^<]*)</code>", schema_table)[: len(fields)]
    assert shown == [("id", "BIGINT"), ("name", "STRING"), ("amount", "DECIMAL(10,2)"), ("at", "TIMESTAMP")]


_ROW = st.tuples(
    st.integers(-20, 20),
    st.one_of(st.none(), st.text(alphabet="abcé東", max_size=3)),
    st.integers(0, 30).map(lambda d: _DAY0 + dt.timedelta(days=d)),
)
_SLICES = st.lists(st.lists(_ROW, min_size=1, max_size=6), min_size=2, max_size=4)
_LITERALS = {
    "id": st.integers(-25, 25).map(str),
    "name": st.text(alphabet="abcé東", max_size=3),
    "day": st.integers(-2, 32).map(lambda d: (_DAY0 + dt.timedelta(days=d)).isoformat()),
}
_OPS = st.sampled_from(["equal", "lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual"])


@st.composite
def _leaf(draw: st.DrawFn) -> dict[str, Any]:
    column = draw(st.sampled_from(sorted(COLUMNS)))
    kind = COLUMNS[column]
    literal = {"op": "literal", "value": draw(_LITERALS[column]), "valueType": kind}
    return {"op": draw(_OPS), "children": [{"op": "column", "name": column, "valueType": kind}, literal]}


_PREDICATES = st.one_of(
    _leaf(),
    st.builds(lambda op, a, b: {"op": op, "children": [a, b]}, st.sampled_from(["and", "or"]), _leaf(), _leaf()),
)
_COMPARE = {
    "equal": lambda a, b: a == b,
    "lessThan": lambda a, b: a < b,
    "lessThanOrEqual": lambda a, b: a <= b,
    "greaterThan": lambda a, b: a > b,
    "greaterThanOrEqual": lambda a, b: a >= b,
}


def _matches(node: dict[str, Any], row: dict[str, Any]) -> bool:
    """SQL's answer for one row (a comparison with null is not true; there is no NOT to flip it)."""
    if node["op"] in ("and", "or"):
        parts = [_matches(child, row) for child in node["children"]]
        return all(parts) if node["op"] == "and" else any(parts)
    column, literal = node["children"]
    value = row[column["name"]]
    typed = {"long": int, "string": str, "date": dt.date.fromisoformat}[literal["valueType"]](literal["value"])
    return value is not None and bool(_COMPARE[node["op"]](value, typed))


def _slice_table(rows: list[tuple[int, str | None, dt.date]], first: int) -> pa.Table:
    return pa.table(
        {
            "row": pa.array(range(first, first + len(rows)), pa.int64()),
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "name": pa.array([r[1] for r in rows], pa.string()),
            "day": pa.array([r[2] for r in rows], pa.date32()),
        }
    )


_PRUNING = (
    [[(1, "a", _DAY0)], [(10, "b", _DAY0)], [(20, None, _DAY0)]],
    {
        "op": "greaterThan",
        "children": [
            {"op": "column", "name": "id", "valueType": "long"},
            {"op": "literal", "value": "15", "valueType": "long"},
        ],
    },
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(slices=_SLICES, predicate=_PREDICATES)
@example(slices=_PRUNING[0], predicate=_PRUNING[1])
def test_hints_on_any_column_skip_files_never_rows(
    hinted: Served, slices: list[list[tuple[int, str | None, dt.date]]], predicate: dict[str, Any]
) -> None:
    name = f"hint-{secrets.token_hex(4)}"
    tables, first = [], 0
    for rows in slices:
        tables.append(_slice_table(rows, first))
        first += len(rows)
    hinted.publish(name, tables)
    rows = [row for table in tables for row in table.to_pylist()]
    wanted = {row["row"] for row in rows if _matches(predicate, row)}

    hint = orjson.dumps(predicate).decode()
    files = _rest(hinted.profile).list_files_in_table(
        Table(name=name, share=SHARE, schema=SCHEMA), jsonPredicateHints=hint
    )
    kept = {orjson.loads(f.stats)["minValues"]["row"] for f in files.add_files}
    starts = [int(table.column("row")[0].as_py()) for table in tables]
    for start, table in zip(starts, tables, strict=True):
        holds_a_match = any(row["row"] in wanted for row in table.to_pylist())
        assert start in kept or not holds_a_match  # a file that could match is never skipped
    url = table_url(hinted.profile, name)
    everything = delta_sharing.load_as_pandas(url)
    hinted_rows = delta_sharing.load_as_pandas(url, jsonPredicateHints=hint)
    assert len(everything) == len(rows) and len(hinted_rows) <= len(everything)
    assert {r for r in hinted_rows["row"] if r in wanted} == {r for r in everything["row"] if r in wanted} == wanted
    if predicate["op"] in _COMPARE and predicate["children"][0]["name"] == "id":  # no nulls: bounds are exact
        op, literal = predicate["op"], int(predicate["children"][1]["value"])
        reachable = {
            start
            for start, table in zip(starts, tables, strict=True)
            if any(_COMPARE[op](bound, literal) for bound in _candidates(table.column("id").to_pylist(), op, literal))
        }
        assert kept == reachable  # as tight as the bounds allow: every file they exclude is skipped
    if (slices, predicate) == _PRUNING:
        assert kept == {2}  # only the slice whose ids reach above 15 (the example that must skip)


def _candidates(ids: list[int], op: str, literal: int) -> list[int]:
    """The values in [min, max] of ``ids`` that decide whether some value there satisfies ``op literal``."""
    low, high = min(ids), max(ids)
    return [low, high] + ([literal] if low <= literal <= high and op == "equal" else [])
