"""The server speaks Delta Sharing: the real, unmodified ``delta-sharing`` client from PyPI reads datasets
from a real server on both stores, and what it loads equals what ``pull`` + ``open_dataset`` read."""

from __future__ import annotations

import datetime as dt
import decimal
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import delta_sharing
import fsspec
import httpx
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from delta_sharing.protocol import CdfOptions, DeltaSharingProfile, Table
from delta_sharing.rest_client import DataSharingRestClient
from requests import HTTPError

from smart_transfer.client import open_dataset
from tests.conftest import ServerProcess, backend_args, make_files, run_cli, start_server, summary
from tests.integration.test_security import token

SHARE, SCHEMA = "smart-transfer", "datasets"
_NAMES = ["Zoë", "東京", "naïve café", "emoji 🚀", None, "plain", "ñandú"]


def typed_slice(start: int, count: int) -> pa.Table:
    """Rows ``start..start+count-1`` of every type the test compares, with a null in each nullable column."""
    rows = range(start, start + count)

    def nulls(values: list[Any]) -> list[Any]:
        return [None if (start + i) % 7 == 3 else v for i, v in enumerate(values)]

    base = dt.datetime(2024, 2, 29, 12, 30, tzinfo=dt.UTC)
    return pa.table(
        {
            "offset": pa.array(rows, pa.int64()),
            "name": pa.array(nulls([_NAMES[i % len(_NAMES)] for i in rows]), pa.string()),
            "amount": pa.array(nulls([decimal.Decimal(i * 1001) / 100 for i in rows]), pa.decimal128(12, 2)),
            "at": pa.array(nulls([base + dt.timedelta(seconds=i * 37) for i in rows]), pa.timestamp("us", tz="UTC")),
            "day": pa.array(nulls([dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in rows]), pa.date32()),
            "ratio": pa.array(nulls([i / 3 for i in rows]), pa.float64()),
            "flag": pa.array(nulls([i % 2 == 0 for i in rows]), pa.bool_()),
            "small": pa.array(nulls(list(rows)), pa.int32()),
        }
    )


def add_typed(workspace: Path, name: str, directory: Path, counts: list[int], start: int = 0) -> int:
    """Append one typed slice per count to ``name`` (one block each); returns the next offset."""
    directory.mkdir(parents=True, exist_ok=True)
    for count in counts:
        path = directory / f"{name}-{start}.parquet"
        pq.write_table(typed_slice(start, count), path)
        result = run_cli("add", name, str(path), "--records", str(count), workspace=workspace)
        assert result.returncode == 0, result.stderr
        start += count
    return start


@dataclass
class Sharing:
    server: ServerProcess
    tokens: Path
    writer: str

    def push(self, workspace: Path, name: str) -> None:
        summary(
            run_cli("push", name, f"{self.server.url}/{name}", "--token", self.writer, "--json", workspace=workspace)
        )

    def pull(self, workspace: Path, name: str) -> None:
        summary(run_cli("pull", f"{self.server.url}/{name}", "--token", self.writer, "--json", workspace=workspace))

    def profile(self, directory: Path, subject: str, *patterns: str) -> Path:
        """A profile written by ``token profile`` for a new token reading ``patterns``."""
        path = directory / f"{subject}.share"
        reads = [arg for pattern in patterns for arg in ("--read", pattern)]
        result = run_cli(
            "token", "profile", subject, "--tokens", str(self.tokens), "--url", self.server.url, *reads, "-o", str(path)
        )
        assert result.returncode == 0, result.stderr
        return path

    def bytes_through_server(self) -> int:
        info = httpx.get(f"{self.server.url}/", headers={"Authorization": f"Bearer {self.writer}"}).json()
        return int(info["object_bytes_through_server"])


@pytest.fixture(scope="module", params=["local", "s3"])
def sharing(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sharing]:
    root = tmp_path_factory.mktemp(f"sharing-{request.param}")
    tokens = root / "tokens.json"
    writer = token(tokens, "writer", "--write", "*")
    s3 = request.getfixturevalue("s3_env") if request.param == "s3" else None
    server = start_server(root / "server", "--tokens", str(tokens), *backend_args(request.param, s3))
    server.backend = request.param
    yield Sharing(server, tokens, writer)
    server.stop()


def table_url(profile: Path, dataset: str) -> str:
    return f"{profile}#{SHARE}.{SCHEMA}.{dataset.replace('.', '__')}"


def local_frame(workspace: Path, name: str, last_block: int | None = None) -> pd.DataFrame:
    with open_dataset(workspace, name) as dataset:
        return dataset.to_pandas(blocks=(0, last_block)) if last_block is not None else dataset.to_pandas()


def test_the_delta_sharing_client_reads_what_a_pull_reads(sharing: Sharing, tmp_path: Path) -> None:
    prefix = f"ds{secrets.token_hex(3)}"
    name, other = f"{prefix}-sales.eu_2024", f"{prefix}_plain"
    a, b = tmp_path / "a", tmp_path / "b"
    nxt = add_typed(a, name, tmp_path / "in", [40, 25])  # blocks 1 and 2
    sharing.push(a, name)
    add_typed(a, name, tmp_path / "in", [30], start=nxt)  # block 3
    sharing.push(a, name)
    add_typed(a, other, tmp_path / "in", [10])
    sharing.push(a, other)
    add_typed(a, "hidden-" + prefix, tmp_path / "in", [5])
    sharing.push(a, "hidden-" + prefix)
    sharing.pull(b, name)
    profile = sharing.profile(tmp_path, "reader", f"{prefix}*")
    url = table_url(profile, name)

    pd.testing.assert_frame_equal(delta_sharing.load_as_pandas(url), local_frame(b, name))
    assert delta_sharing.get_table_version(url) == 3
    for version in (1, 2):
        pd.testing.assert_frame_equal(delta_sharing.load_as_pandas(url, version=version), local_frame(b, name, version))
    limited = delta_sharing.load_as_pandas(url, limit=45)
    pd.testing.assert_frame_equal(limited, local_frame(b, name).head(45))

    changes = delta_sharing.load_table_changes_as_pandas(url, starting_version=2, ending_version=3)
    assert list(changes["offset"]) == list(range(40, 95))
    assert list(changes["_commit_version"]) == [2] * 25 + [3] * 30
    assert set(changes["_change_type"]) == {"insert"}
    expected = local_frame(b, name).iloc[40:95].reset_index(drop=True)
    pd.testing.assert_frame_equal(changes[list(expected.columns)], expected)

    client = delta_sharing.SharingClient(profile)
    listed = {(t.share, t.schema, t.name) for t in client.list_all_tables()}
    assert listed == {(SHARE, SCHEMA, name.replace(".", "__")), (SHARE, SCHEMA, other)}
    assert [s.name for s in client.list_shares()] == [SHARE]
    assert {t.name for t in client.list_tables(client.list_schemas(client.list_shares()[0])[0])} == {
        t[2] for t in listed
    }
    assert len(delta_sharing.load_as_pandas(table_url(profile, other))) == 10
    the_delta_format_gives_what_the_parquet_format_gives(profile, name)  # on the same table: no second setup
    the_delta_format_is_chosen_by_the_capabilities_header(sharing, name)
    if sharing.server.backend == "s3":
        assert sharing.bytes_through_server() == 0  # the client read every file from S3 itself, in both formats


def _rest(profile: Path) -> DataSharingRestClient:
    return DataSharingRestClient(DeltaSharingProfile.read_from_file(str(profile)))


def test_hints_prune_files_and_a_push_does_not_change_a_query(sharing: Sharing, tmp_path: Path) -> None:
    name = f"hints-{secrets.token_hex(3)}"
    a = tmp_path / "a"
    nxt = add_typed(a, name, tmp_path / "in", [10, 10, 10, 10])
    sharing.push(a, name)
    rest = _rest(sharing.profile(tmp_path, "hints", name))
    table = Table(name=name, share=SHARE, schema=SCHEMA)
    predicate = {
        "op": "and",
        "children": [
            {
                "op": "greaterThanOrEqual",
                "children": [
                    {"op": "column", "name": "offset", "valueType": "long"},
                    {"op": "literal", "value": "12", "valueType": "long"},
                ],
            },
            {
                "op": "lessThan",
                "children": [
                    {"op": "column", "name": "offset", "valueType": "long"},
                    {"op": "literal", "value": "25", "valueType": "long"},
                ],
            },
        ],
    }
    pruned = rest.list_files_in_table(table, jsonPredicateHints=orjson.dumps(predicate).decode())
    assert [orjson.loads(f.stats)["minValues"]["offset"] for f in pruned.add_files] == [10, 20]
    assert len(rest.list_files_in_table(table, limitHint=15).add_files) == 2
    assert len(rest.list_files_in_table(table, predicateHints=["offset > 29"]).add_files) == 1

    snapshot = rest.list_files_in_table(table)
    assert snapshot.delta_table_version == 4 and len(snapshot.add_files) == 4
    add_typed(a, name, tmp_path / "in", [10], start=nxt)
    sharing.push(a, name)  # while the client still reads the answer it got
    http = fsspec.filesystem("http")
    rows = [pq.read_table(f.url, filesystem=http).num_rows for f in snapshot.add_files]
    assert rows == [10, 10, 10, 10]
    assert [f.id for f in snapshot.add_files] == [f.id for f in rest.list_files_in_table(table, version=4).add_files]
    assert rest.list_files_in_table(table).delta_table_version == 5


def _error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["errorCode"] == code and isinstance(body["message"], str) and body["message"], body
    assert ("not allowed" in body["message"]) == (status == 405), body  # only a wrong method says so


def test_tokens_and_grants_decide_what_a_client_sees(sharing: Sharing, tmp_path: Path) -> None:
    name = f"auth-{secrets.token_hex(3)}"
    a = tmp_path / "a"
    add_typed(a, name, tmp_path / "in", [5])
    sharing.push(a, name)
    outsider = sharing.profile(tmp_path, "outsider", "nothing-*")
    with pytest.raises(HTTPError) as caught:
        delta_sharing.load_as_pandas(table_url(outsider, name))
    assert caught.value.response is not None and caught.value.response.status_code == 403
    assert caught.value.response.json()["errorCode"] == "PERMISSION_DENIED"
    assert name not in {t.name for t in delta_sharing.SharingClient(outsider).list_all_tables()}

    base = f"{sharing.server.url}/delta-sharing"
    _error(httpx.get(f"{base}/shares"), 401, "UNAUTHENTICATED")
    _error(httpx.get(f"{base}/shares", headers={"Authorization": "Bearer st_wrong"}), 401, "UNAUTHENTICATED")


def test_bad_input_gets_the_protocols_error_and_changes_nothing(sharing: Sharing, tmp_path: Path) -> None:
    name = f"bad-{secrets.token_hex(3)}"
    a = tmp_path / "a"
    add_typed(a, name, tmp_path / "in", [5, 5])
    sharing.push(a, name)
    auth = {"Authorization": f"Bearer {sharing.writer}"}
    head = httpx.get(f"{sharing.server.url}/{name}/refs/head", headers=auth).text
    base = f"{sharing.server.url}/delta-sharing/shares"
    table = f"{base}/{SHARE}/schemas/{SCHEMA}/tables/{name}"
    with httpx.Client(headers=auth) as http:
        _error(http.get(f"{base}/nope"), 404, "RESOURCE_DOES_NOT_EXIST")
        _error(http.get(f"{base}/{SHARE}/schemas/nope/tables"), 404, "RESOURCE_DOES_NOT_EXIST")
        _error(http.get(f"{base}/{SHARE}/schemas/{SCHEMA}/tables/no-such/metadata"), 404, "RESOURCE_DOES_NOT_EXIST")
        _error(http.get(f"{base}/{SHARE}/schemas/{SCHEMA}/tables/bad..name/version"), 404, "RESOURCE_DOES_NOT_EXIST")
        _error(http.post(f"{table}/query", json={"version": 3}), 400, "INVALID_PARAMETER_VALUE")
        # a body that is not the query object at all: MALFORMED_REQUEST; a field of the wrong type or range:
        # INVALID_PARAMETER_VALUE (types are strict: neither true nor "1" is a version)
        for body in (b"{not json", b"\xff\xfe{}", b"[1]", b'"version"', b"3"):
            _error(http.post(f"{table}/query", content=body), 400, "MALFORMED_REQUEST")
        wrong: list[dict[str, Any]] = [{"version": -1}, {"version": True}, {"version": "1"}, {"limitHint": "many"}]
        for fields in [*wrong, {"predicateHints": 3}, {"predicateHints": [1]}]:
            _error(http.post(f"{table}/query", json=fields), 400, "INVALID_PARAMETER_VALUE")
        _error(http.post(f"{table}/query", json={"jsonPredicateHints": "{oops"}), 400, "INVALID_PARAMETER_VALUE")
        _error(http.post(f"{table}/query", json={"jsonPredicateHints": '{"op": 1}'}), 400, "INVALID_PARAMETER_VALUE")
        _error(
            http.post(f"{table}/query", json={"version": 1, "timestamp": "2024-01-01"}), 400, "INVALID_PARAMETER_VALUE"
        )
        _error(http.post(f"{table}/query", json={"timestamp": "yesterday"}), 400, "INVALID_PARAMETER_VALUE")
        _error(http.post(f"{table}/query", json={"timestamp": "2000-01-01T00:00:00Z"}), 400, "INVALID_PARAMETER_VALUE")
        _error(http.get(f"{table}/changes"), 400, "INVALID_PARAMETER_VALUE")
        _error(
            http.get(f"{table}/changes", params={"startingVersion": 2, "endingVersion": 1}),
            400,
            "INVALID_PARAMETER_VALUE",
        )
        _error(http.get(f"{table}/changes", params={"startingVersion": 9}), 400, "INVALID_PARAMETER_VALUE")
        for size in (-1, 10**9, "x"):  # 0 is allowed: test_max_results_zero_and_strict_fields_follow_the_protocol
            _error(http.get(f"{base}", params={"maxResults": size}), 400, "INVALID_PARAMETER_VALUE")
        for token_text in ("garbage!", "c3QxOnNoYXJlczp4"):  # not base64; a token of another listing
            _error(
                http.get(f"{base}/{SHARE}/all-tables", params={"pageToken": token_text}), 400, "INVALID_PARAMETER_VALUE"
            )
        wrong_method = http.delete(f"{table}/query")
        _error(wrong_method, 405, "METHOD_NOT_ALLOWED")
        assert wrong_method.headers["allow"] == "POST"
        _error(http.get(f"{base}/{SHARE}/nothing-here"), 404, "RESOURCE_DOES_NOT_EXIST")

        answer = http.get(f"{table}/metadata")
        assert answer.status_code == 200 and answer.headers["Delta-Table-Version"] == "2"
        assert answer.headers["content-type"].startswith("application/x-ndjson")
        fields = orjson.loads(orjson.loads(answer.text.splitlines()[1])["metaData"]["schemaString"])["fields"]
        assert [(f["name"], f["type"]) for f in fields][:4] == [
            ("offset", "long"),
            ("name", "string"),
            ("amount", "decimal(12,2)"),
            ("at", "timestamp"),
        ]
        lines = [orjson.loads(line) for line in http.post(f"{table}/query", json={}).text.splitlines()]
        expires = [line["file"]["expirationTimestamp"] / 1000 for line in lines[2:]]
        assert len(expires) == 2 and all(3500 < e - time.time() <= 3601 for e in expires)  # --sharing-url-ttl
        version = http.get(f"{table}/version", params={"startingTimestamp": "2000-01-01 00:00:00"})
        assert version.status_code == 200 and version.headers["Delta-Table-Version"] == "0"
    assert httpx.get(f"{sharing.server.url}/{name}/refs/head", headers=auth).text == head
    document = httpx.get(f"{sharing.server.url}/delta-sharing/openapi.json")
    assert document.status_code == 200 and "/shares/{share}/all-tables" in document.json()["paths"]
    # the prefix reserves only the paths below it: a dataset named delta-sharing is still described
    assert httpx.get(f"{sharing.server.url}/delta-sharing", headers=auth).json()["error"]["code"] == "DatasetNotFound"


def test_listing_pages_through_every_table(sharing: Sharing, tmp_path: Path) -> None:
    prefix = f"page{secrets.token_hex(3)}"
    a = tmp_path / "a"
    names = [f"{prefix}-{i}" for i in range(5)]
    for name in names:
        add_typed(a, name, tmp_path / "in", [3])
        sharing.push(a, name)
    not_parquet = f"{prefix}-zz-bytes"  # a dataset whose slices are not Parquet is no table
    assert run_cli("add", not_parquet, str(make_files(tmp_path / "bin", 1, 100)[0]), workspace=a).returncode == 0
    sharing.push(a, not_parquet)
    profile = sharing.profile(tmp_path, "pager", f"{prefix}-*")
    client = delta_sharing.SharingClient(profile)
    rest = client._rest_client
    share = client.list_shares()[0]
    seen, token_text, pages = [], None, 0
    while True:
        answer = rest.list_all_tables(share, max_results=2, page_token=token_text)
        seen += [t.name for t in answer.tables]
        pages += 1
        token_text = answer.next_page_token
        if not token_text:
            break
    assert seen == names and pages == 3
    with pytest.raises(HTTPError) as caught:
        delta_sharing.load_as_pandas(table_url(profile, not_parquet))
    assert caught.value.response is not None and caught.value.response.json()["errorCode"] == "RESOURCE_DOES_NOT_EXIST"


def _iso(milliseconds: int) -> str:
    return dt.datetime.fromtimestamp(milliseconds / 1000, dt.UTC).isoformat(timespec="milliseconds")


def test_timestamps_name_the_versions_committed_by_then(sharing: Sharing, tmp_path: Path) -> None:
    name = f"times-{secrets.token_hex(3)}"
    a = tmp_path / "a"
    add_typed(a, name, tmp_path / "in", [4, 5, 6])  # blocks 1, 2, 3, each added by its own command
    sharing.push(a, name)
    profile = sharing.profile(tmp_path, "clock", name)
    table = Table(name=name, share=SHARE, schema=SCHEMA)
    changes = _rest(profile).list_table_changes(table, CdfOptions(starting_version=1))
    stamps = {action.version: action.timestamp for action in changes.actions}
    assert sorted(stamps) == [1, 2, 3] and stamps[1] <= stamps[2] <= stamps[3]
    url = table_url(profile, name)
    assert len(delta_sharing.load_as_pandas(url, timestamp=_iso(stamps[2]))) == 9
    assert delta_sharing.get_table_version(url, starting_timestamp=_iso(stamps[2])) == 2
    since = delta_sharing.load_table_changes_as_pandas(url, starting_timestamp=_iso(stamps[3]))
    assert list(since["offset"]) == list(range(9, 15)) and set(since["_commit_version"]) == {3}
    assert list(since["_commit_timestamp"]) == [stamps[3]] * 6

    # the protocol's rules: a snapshot at a time after the last version is the latest; a version or the
    # changes starting before version 0 start at 0, and after the last version are a 400; the first
    # format the protocol wrote (no zone: UTC, one-digit month and day) and any zone name the same time
    future, past = "9999-12-31T23:59:59Z", "2000-01-01 00:00:00"
    assert len(delta_sharing.load_as_pandas(url, timestamp=future)) == 15
    assert delta_sharing.get_table_version(url, starting_timestamp=past) == 0
    assert len(delta_sharing.load_table_changes_as_pandas(url, starting_timestamp=past)) == 15
    ended = delta_sharing.load_table_changes_as_pandas(url, starting_version=2, ending_timestamp=future)
    assert set(ended["_commit_version"]) == {2, 3}
    moment = dt.datetime.fromtimestamp(stamps[2] / 1000, dt.UTC)
    plain = f"{moment.year}-{moment.month}-{moment.day} {moment:%H:%M:%S}.{moment.microsecond // 1000:03d}"
    zoned = moment.astimezone(dt.timezone(dt.timedelta(hours=-5, minutes=-30))).isoformat(timespec="milliseconds")
    for text in (plain, zoned):
        assert delta_sharing.get_table_version(url, starting_timestamp=text) == 2
        assert len(delta_sharing.load_as_pandas(url, timestamp=text)) == 9
    table_path = f"{sharing.server.url}/delta-sharing/shares/{SHARE}/schemas/{SCHEMA}/tables/{name}"
    auth = {"Authorization": f"Bearer {sharing.writer}"}
    with httpx.Client(headers=auth) as http:
        for params in ({"startingTimestamp": future}, {"startingVersion": 1, "endingTimestamp": past}):
            answer = http.get(f"{table_path}/changes", params=params)
            _error(answer, 400, "INVALID_PARAMETER_VALUE")
            assert "version" in answer.json()["message"]
        _error(http.get(f"{table_path}/version", params={"startingTimestamp": future}), 400, "INVALID_PARAMETER_VALUE")
        for text in ("2024-01-01", "2024-02-30 00:00:00", "2024-01-01T00:00Z", "yesterday", "٢٠٢٤-01-01 00:00:00"):
            answer = http.post(f"{table_path}/query", json={"timestamp": text})
            _error(answer, 400, "INVALID_PARAMETER_VALUE")
            assert "not a timestamp" in answer.json()["message"]


def test_token_profile_refuses_bad_input_and_changes_nothing(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    for args in (["--url", "data.example.com", "--read", "*"], ["--url", "https://data.example.com"]):
        result = run_cli("token", "profile", "carol", "--tokens", str(tokens), *args)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not tokens.exists()
    printed = run_cli(
        "token", "profile", "carol", "--tokens", str(tokens), "--url", "https://h.example", "--read", "s*"
    )
    profile = orjson.loads(printed.stdout)
    assert profile["endpoint"] == "https://h.example/delta-sharing" and profile["bearerToken"].startswith("st_")
    assert [entry["read"] for entry in orjson.loads(tokens.read_bytes())["tokens"]] == [["s*"]]


@dataclass
class Cased:
    """Two datasets whose names differ only by case (3 and 4 rows, one slice each), and two profiles:
    one reading both, one reading the upper-case one only."""

    prefix: str
    upper: str
    lower: str
    both: Path
    narrow: Path


@pytest.fixture(scope="module")
def cased(sharing: Sharing, tmp_path_factory: pytest.TempPathFactory) -> Cased:
    root = tmp_path_factory.mktemp("cased")
    prefix = f"case{secrets.token_hex(3)}"
    upper, lower = f"{prefix}-Sales.eu", f"{prefix}-sales.eu"
    for name, rows in ((upper, 3), (lower, 4)):
        add_typed(root / "a", name, root / "in", [rows])
        sharing.push(root / "a", name)
    both = sharing.profile(root, "both", f"{prefix}-*")
    return Cased(prefix, upper, lower, both, sharing.profile(root, "narrow", f"{prefix}-S*"))


def test_names_match_without_regard_to_case(sharing: Sharing, cased: Cased) -> None:
    prefix, upper, both, narrow = cased.prefix, cased.upper, cased.both, cased.narrow
    shouted = f"{SHARE.upper()}.Datasets.{prefix.upper()}-SALES__EU"

    # the grant decides which dataset a name means: the one spelled so, else the one readable, never one
    # the token may not read
    narrow_frame = delta_sharing.load_as_pandas(f"{narrow}#{shouted}")
    pd.testing.assert_frame_equal(narrow_frame, delta_sharing.load_as_pandas(table_url(both, upper)))
    assert len(narrow_frame) == 3
    assert len(delta_sharing.load_as_pandas(f"{narrow}#{SHARE}.{SCHEMA}.{prefix}-sales__eu")) == 3
    assert delta_sharing.get_table_version(f"{narrow}#{shouted}") == 1
    assert len(delta_sharing.load_as_pandas(table_url(both, cased.lower))) == 4  # spelled exactly: that one
    with pytest.raises(HTTPError) as caught:  # two readable tables, neither spelled so
        delta_sharing.load_as_pandas(f"{both}#{shouted}")
    assert caught.value.response is not None and caught.value.response.status_code == 404
    assert "differ only by case" in caught.value.response.json()["message"]
    assert [t.name for t in delta_sharing.SharingClient(narrow).list_all_tables()] == [f"{prefix}-Sales__eu"]

    base = f"{sharing.server.url}/delta-sharing/shares"
    narrow_token = orjson.loads(narrow.read_bytes())["bearerToken"]
    with httpx.Client(headers={"Authorization": f"Bearer {narrow_token}"}) as http:
        _error(
            http.get(f"{base}/{SHARE}/schemas/{SCHEMA}/tables/{prefix.upper()}-NOPE/version"), 403, "PERMISSION_DENIED"
        )
        assert http.get(f"{base}/SMART-Transfer").json() == {"share": {"name": SHARE}}  # answers: the canonical name
        assert http.get(f"{base}/Smart-Transfer/schemas").json()["items"] == [{"name": SCHEMA, "share": SHARE}]
        metadata = http.get(f"{base}/smart-TRANSFER/schemas/DATASETS/tables/{prefix}-SALES.eu/metadata")
        assert metadata.status_code == 200, metadata.text
        assert orjson.loads(metadata.text.splitlines()[1])["metaData"]["name"] == upper


def test_max_results_zero_and_strict_fields_follow_the_protocol(sharing: Sharing, cased: Cased) -> None:
    auth = {"Authorization": f"Bearer {sharing.writer}"}
    base = f"{sharing.server.url}/delta-sharing/shares"
    table = f"{base}/{SHARE}/schemas/{SCHEMA}/tables/{cased.lower}"
    with httpx.Client(headers=auth) as http:
        for listing in (base, f"{base}/{SHARE}/schemas", f"{base}/{SHARE}/all-tables"):
            empty = http.get(listing, params={"maxResults": 0})
            assert empty.status_code == 200 and empty.json()["items"] == [], empty.text
            resumed = http.get(listing, params={"maxResults": 1000, "pageToken": empty.json()["nextPageToken"]})
            assert resumed.json()["items"] == http.get(listing).json()["items"] != []
            for size in (-1, 1001, 1.5, "x", "true"):
                _error(http.get(listing, params={"maxResults": size}), 400, "INVALID_PARAMETER_VALUE")
        wrong: list[dict[str, Any]] = [
            {"version": True},
            {"version": "1"},
            {"version": 1.0},
            {"version": 2**63},
            {"limitHint": "5"},
            {"limitHint": False},
            {"limitHint": 2**31},
            {"predicateHints": "x"},
            {"predicateHints": [1]},
            {"jsonPredicateHints": {"op": "and"}},
            {"timestamp": 5},
            {"timestamp": ["2024-01-01T00:00:00Z"]},
            {"startingVersion": "1"},
            {"startingVersion": True},
            {"startingVersion": 1, "endingVersion": "2"},
            {"startingVersion": 1, "endingVersion": 2.0},
        ]
        for fields in wrong:
            answer = http.post(f"{table}/query", json=fields)
            _error(answer, 400, "INVALID_PARAMETER_VALUE")
            assert next(iter(fields if len(fields) == 1 else ["endingVersion"])) in answer.json()["message"]
        for params in (
            {"startingVersion": "x"},
            {"startingVersion": 1.5},
            {"startingVersion": 1, "endingVersion": "y"},
        ):
            _error(http.get(f"{table}/changes", params=params), 400, "INVALID_PARAMETER_VALUE")
        good = http.post(f"{table}/query", json={"startingVersion": 0, "endingVersion": 1, "limitHint": 1})
        assert good.status_code == 200 and len(good.text.splitlines()) == 3


def _both_formats(load: Any, *args: Any, **kwargs: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """What a load of the client gives in the parquet format and in the delta format."""
    return load(*args, use_delta_format=False, **kwargs), load(*args, use_delta_format=True, **kwargs)


def _lines(answer: httpx.Response) -> list[dict[str, Any]]:
    assert answer.status_code == 200, answer.text
    return [orjson.loads(line) for line in answer.text.splitlines()]


def the_delta_format_gives_what_the_parquet_format_gives(profile: Path, name: str) -> None:
    """With ``use_delta_format=True`` (the client reads through delta-kernel-rs) every load and change feed
    of ``name`` (three versions) equals the parquet format's."""
    url = table_url(profile, name)
    stamps = {
        a.version: a.timestamp
        for a in _rest(profile)
        .list_table_changes(Table(name=name, share=SHARE, schema=SCHEMA), CdfOptions(starting_version=1))
        .actions
    }
    for when in ({}, {"version": 1}, {"version": 2}, {"timestamp": _iso(stamps[2])}):
        parquet, delta = _both_formats(delta_sharing.load_as_pandas, url, **when)
        pd.testing.assert_frame_equal(delta, parquet)
    for start, end in ((1, 3), (2, None)):
        parquet, delta = _both_formats(
            delta_sharing.load_table_changes_as_pandas, url, starting_version=start, ending_version=end
        )
        # the client's kernel path takes a version's time from the mtime it gives its local log file: whole
        # seconds, as a datetime, where the parquet path gives the server's milliseconds
        committed = parquet.pop("_commit_timestamp") // 1000
        assert list(delta.pop("_commit_timestamp").astype("int64") // 10**6) == list(committed)
        pd.testing.assert_frame_equal(delta, parquet)


def the_delta_format_is_chosen_by_the_capabilities_header(sharing: Sharing, name: str) -> None:
    """The protocol's header chooses the format (parquet unless delta alone is asked) and the answer names
    it; the delta lines wrap the parquet format's files, versions and statistics as Delta actions."""
    table = f"{sharing.server.url}/delta-sharing/shares/{SHARE}/schemas/{SCHEMA}/tables/{name.replace('.', '__')}"
    with httpx.Client(headers={"Authorization": f"Bearer {sharing.writer}"}) as http:
        asked = {"delta-sharing-capabilities": "ResponseFormat=Delta;readerfeatures=deletionvectors"}
        delta_lines = _lines(answer := http.post(f"{table}/query", json={"version": 2}, headers=asked))
        assert answer.headers["delta-sharing-capabilities"] == "responseformat=delta"
        parquet_lines = _lines(http.post(f"{table}/query", json={"version": 2}))
        assert delta_lines[0] == {"protocol": {"deltaProtocol": {"minReaderVersion": 1, "minWriterVersion": 4}}}
        metadata = delta_lines[1]["metaData"]
        assert metadata["version"] == 2 and metadata["numFiles"] == 2
        assert metadata["deltaMetadata"]["configuration"] == {"delta.enableChangeDataFeed": "true"}
        assert metadata["deltaMetadata"]["schemaString"] == parquet_lines[1]["metaData"]["schemaString"]
        adds = [(line["file"]["id"], line["file"]["deltaSingleAction"]["add"]) for line in delta_lines[2:]]
        files = [line["file"] for line in parquet_lines[2:]]
        assert [(i, add["path"].split("?")[0], add["size"], add["stats"]) for i, add in adds] == [
            (f["id"], f["url"].split("?")[0], f["size"], f["stats"]) for f in files
        ]
        assert [line["file"]["version"] for line in delta_lines[2:]] == [1, 2]
        for offered in ("responseformat=delta,parquet", "readerfeatures=columnmapping", ""):
            answer = http.get(f"{table}/metadata", headers={"delta-sharing-capabilities": offered})
            assert "protocol" in _lines(answer)[0] and "deltaProtocol" not in _lines(answer)[0]["protocol"]
            assert answer.headers["delta-sharing-capabilities"] == "responseformat=parquet"
        changes = http.get(f"{table}/changes", params={"startingVersion": 3}, headers=asked)
        assert [line["file"]["deltaSingleAction"]["add"]["dataChange"] for line in _lines(changes)[2:]] == [True]
        assert [line["file"]["version"] for line in _lines(changes)[2:]] == [3]
        _error(
            http.get(f"{table}/metadata", headers={"delta-sharing-capabilities": "responseformat=avro"}),
            400,
            "INVALID_PARAMETER_VALUE",
        )
