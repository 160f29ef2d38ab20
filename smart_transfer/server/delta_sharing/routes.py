"""The Delta Sharing REST routes: shares, schemas and tables listed for the token's read grants; a table's
version, metadata, files (at a version or time, or since a version) and changes. Files are answered
with presigned GET URLs of the store: the client reads the Parquet bytes from storage, never through
this server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import Response

from smart_transfer.model import ObjectKind, ObjectRef
from smart_transfer.repo.footer_stats import SliceStats
from smart_transfer.repo.repository import per_dataset
from smart_transfer.server.auth import Access, Grant
from smart_transfer.server.delta_sharing.delta_format import (
    ResponseFormat,
    file_line,
    header_lines,
    response_format,
    table_answer,
)
from smart_transfer.server.delta_sharing.docs import (
    GetShareResponse,
    ListSchemasResponse,
    ListSharesResponse,
    ListTablesResponse,
    errors,
    table_responses,
)
from smart_transfer.server.delta_sharing.errors import SharingError, invalid, not_found
from smart_transfer.server.delta_sharing.hints import Predicate, json_predicate, sql_predicate
from smart_transfer.server.delta_sharing.naming import SCHEMA, SHARE, dataset_name, is_schema, is_share, table_name
from smart_transfer.server.delta_sharing.query import LONG_MAX, QUERY_BODY_DOCUMENT, QueryRequest, query_body
from smart_transfer.server.delta_sharing.responses import (
    MAX_RESULTS,
    SignedFile,
    listing_body,
    metadata_line,
    page,
    protocol_line,
    version_answer,
)
from smart_transfer.server.delta_sharing.stream import kept_files, streamed
from smart_transfer.server.delta_sharing.tables import TableHistory, Tables, TableVersion, parse_timestamp
from smart_transfer.server.guard import Asking, admitted, authenticate
from smart_transfer.server.listing import DATASETS_PER_PAGE, check_page_size, may_list, readable_datasets
from smart_transfer.server.rest_common import client_of, operation_of, server_state
from smart_transfer.server.state import ServerState
from smart_transfer.server.workers import on_workers

NAME = Annotated[str, Path(max_length=256)]
MaxResults = Annotated[
    int | None,
    Query(
        alias="maxResults",
        description=f"items per page, 0..{MAX_RESULTS} (default: {MAX_RESULTS} shares or schemas, "
        f"{DATASETS_PER_PAGE} tables; 0: no items, a nextPageToken)",
    ),
]
PageToken = Annotated[str | None, Query(alias="pageToken", max_length=512, description="a nextPageToken")]


class Caller:
    """Who asks (their grant; None when the server is anonymous, and what they sent to say so) and the
    server's state."""

    def __init__(self, state: ServerState, asking: Asking, grant: Grant | None, tables: Tables) -> None:
        self.state = state
        self.asking = asking
        self.grant = grant
        self.tables = tables

    def may_read(self, dataset: str) -> bool:
        return may_list(self.grant, dataset)

    def refuse_unless_readable(self, dataset: str) -> None:
        """The guard's 403 (server/guard.py ``authenticate``) when the grant does not cover ``dataset``."""
        authenticate(self.state, replace(self.asking, dataset=dataset, access=Access.READ))


async def caller(request: Request) -> AsyncIterator[Caller]:
    """Every route passes the server's one guard (server/guard.py): not draining, a known bearer token
    (401), one request slot (429). The read grant (403) is checked on the dataset a table name resolves to,
    in ``_table``: names match without regard to case, so only the datasets the token may read decide
    which one a name means. The routes run on the worker pool (``on_workers``), where the overload
    guard sees their queue."""
    asking = Asking(request.headers.get("authorization"), client_of(request), operation=operation_of(request))
    state = server_state(request)
    async with admitted(state, asking) as admission:
        yield Caller(state, asking, admission.grant, request.app.state.sharing_tables)


Who = Annotated[Caller, Depends(caller)]
QueryBody = Annotated[QueryRequest, Depends(query_body)]
Format = Annotated[ResponseFormat, Depends(response_format)]
router = APIRouter(tags=["Delta Sharing"])
LISTING: dict[str, Any] = {"responses": errors(404), "response_model_exclude_none": True}


def _share(share: str) -> None:
    if not is_share(share):
        raise not_found(f"no share {share[:100]!r} (this server has one: {SHARE!r})")


def _schema(share: str, schema: str) -> None:
    _share(share)
    if not is_schema(schema):
        raise not_found(f"no schema {schema[:100]!r} in share {SHARE!r} (it has one: {SCHEMA!r})")


def _table(who: Caller, share: str, schema: str, table: str) -> TableHistory:
    _schema(share, schema)
    history = who.tables.table(table, who.may_read)
    if history is None:
        who.refuse_unless_readable(dataset_name(table))  # 403: the grant does not cover the name as spelled
        raise not_found(f"no table {table[:100]!r}")
    return history


def _table_items(who: Caller, names: list[str]) -> list[dict[str, Any]]:
    """The tables among ``names``, HEAD_READS_PARALLEL at a time (on S3 each reads its head, unless read
    moments ago: ``Tables.listed``)."""

    def item(name: str) -> dict[str, Any] | None:
        try:
            history = who.tables.listed(name)
        except SharingError:  # no schema and no data yet, or deleted since listed
            return None
        return {"name": table_name(name), "schema": SCHEMA, "share": SHARE, "id": history.table_id}

    return [found for found in per_dataset(item, names) if found is not None]


@router.get(
    "/shares", operation_id="listShares", summary="List the shares (one)", response_model=ListSharesResponse, **LISTING
)
@on_workers
def list_shares(who: Who, max_results: MaxResults = None, page_token: PageToken = None) -> dict[str, Any]:
    names, token = page("shares", [SHARE], max_results, page_token)
    return listing_body([{"name": name} for name in names], token)


@router.get(
    "/shares/{share}",
    operation_id="getShare",
    summary="Get a share",
    response_model=GetShareResponse,
    responses=errors(404),
)
@on_workers
def get_share(who: Who, share: NAME) -> dict[str, Any]:
    _share(share)
    return {"share": {"name": SHARE}}


@router.get(
    "/shares/{share}/schemas",
    operation_id="listSchemas",
    summary="List the schemas of a share (one)",
    response_model=ListSchemasResponse,
    **LISTING,
)
@on_workers
def list_schemas(who: Who, share: NAME, max_results: MaxResults = None, page_token: PageToken = None) -> dict[str, Any]:
    _share(share)
    names, token = page("schemas", [SCHEMA], max_results, page_token)
    return listing_body([{"name": name, "share": SHARE} for name in names], token)


def _list_tables(who: Caller, max_results: int | None, page_token: str | None) -> dict[str, Any]:
    """A page of the datasets the token may read (server/listing.py, as every face lists them), those
    that are tables: a page may hold fewer than ``maxResults``."""
    size = check_page_size(max_results, smallest=0)
    listed = readable_datasets(who.state.repository, who.grant, page_token, size)
    return listing_body(_table_items(who, listed.names), listed.next_token or "")


@router.get(
    "/shares/{share}/schemas/{schema}/tables",
    operation_id="listTables",
    summary="List the tables of a schema: the datasets the token may read that have a schema or data",
    response_model=ListTablesResponse,
    **LISTING,
)
@on_workers
def list_tables(
    who: Who, share: NAME, schema: NAME, max_results: MaxResults = None, page_token: PageToken = None
) -> dict[str, Any]:
    _schema(share, schema)
    return _list_tables(who, max_results, page_token)


@router.get(
    "/shares/{share}/all-tables",
    operation_id="listAllTables",
    summary="List every table of a share",
    response_model=ListTablesResponse,
    **LISTING,
)
@on_workers
def list_all_tables(
    who: Who, share: NAME, max_results: MaxResults = None, page_token: PageToken = None
) -> dict[str, Any]:
    _share(share)
    return _list_tables(who, max_results, page_token)


TABLE = "/shares/{share}/schemas/{schema}/tables/{table}"


@router.get(
    TABLE + "/version",
    operation_id="queryTableVersion",
    summary="A table's version (header only)",
    response_class=Response,
    responses=table_responses("the version, in the header", ndjson=False),
)
@on_workers
def table_version(
    who: Who,
    share: NAME,
    schema: NAME,
    table: NAME,
    starting_timestamp: Annotated[str | None, Query(alias="startingTimestamp", max_length=64)] = None,
) -> Response:
    history = _table(who, share, schema, table)
    if starting_timestamp is None:
        return version_answer(history.latest)
    return version_answer(history.version_from(parse_timestamp(starting_timestamp, up=True)))


@router.get(
    TABLE + "/metadata",
    operation_id="queryTableMetadata",
    summary="A table's protocol and metadata (NDJSON)",
    response_class=Response,
    responses=table_responses("protocol and metaData lines"),
)
@on_workers
def table_metadata(who: Who, share: NAME, schema: NAME, table: NAME, fmt: Format) -> Response:
    history = _table(who, share, schema, table)
    schema_json = who.tables.schema(history, history.latest)
    lines = header_lines(fmt, protocol_line(), metadata_line(history, schema_json, None))
    return table_answer(fmt, streamed(lines, iter([]), history.dataset), history.latest)


def _signed(who: Caller, history: TableHistory, chosen: list[tuple[TableVersion, SliceStats]]) -> list[SignedFile]:
    """A presigned GET per file, living the sharing URL lifetime."""
    dataset = who.state.repository.dataset(history.dataset)
    ttl = who.state.settings.sharing_url_ttl
    signed = []
    for entry, stats in chosen:
        assert entry.data is not None
        ref = ObjectRef(ObjectKind.DATA, entry.data.physical_hash, entry.data.size)
        request = who.state.signer.get(dataset, ref, ttl)
        signed.append(SignedFile(entry, stats, request.url, request.expires_at))
    return signed


@dataclass(frozen=True)
class Answer:
    """What a table answer says: its format, its two first lines, the version its header names, and its
    file lines' shape (``wrapper``: file or add; whether each names its version)."""

    fmt: ResponseFormat
    header: list[dict[str, Any]]
    version: int
    wrapper: str
    with_version: bool


def _answer(
    who: Caller,
    history: TableHistory,
    entries: Iterator[TableVersion],
    hints: tuple[Predicate | None, int | None],
    answer: Answer,
) -> Response:
    """The streamed answer (``stream.py``): the header lines, then the lines of the ``entries`` the hints
    keep, a chunk at a time, presigned as they are written."""

    def files() -> Iterator[list[dict[str, Any]]]:
        for kept in kept_files(who.tables, history, entries, hints):
            signed = _signed(who, history, kept)
            yield [file_line(answer.fmt, one, answer.wrapper, answer.with_version) for one in signed]

    chunks = streamed(answer.header, files(), f"a table answer of {history.dataset}")
    return table_answer(answer.fmt, chunks, answer.version)


def _snapshot_version(history: TableHistory, body: QueryRequest) -> int | None:
    """The version a snapshot query names (None: the latest)."""
    if body.version is not None:
        return history.check_version(body.version)
    if body.timestamp is not None:
        return history.version_at(parse_timestamp(body.timestamp))
    return None


def _range(history: TableHistory, start: int, end: int | None) -> tuple[int, int]:
    first = history.check_version(start, "startingVersion")
    last = history.check_version(end, "endingVersion") if end is not None else history.latest
    if last < first:
        raise invalid(f"endingVersion {last} is before startingVersion {first}")
    return first, last


@router.post(
    TABLE + "/query",
    operation_id="queryTable",
    summary="A table's files, with presigned URLs (NDJSON)",
    response_class=Response,
    responses=table_responses("protocol, metaData, then a file (or, with startingVersion, an add) line per file"),
    openapi_extra=QUERY_BODY_DOCUMENT,
)
@on_workers
def query_table(who: Who, share: NAME, schema: NAME, table: NAME, body: QueryBody, fmt: Format) -> Response:
    history = _table(who, share, schema, table)
    travel = [name for name in ("version", "timestamp", "startingVersion") if getattr(body, name) is not None]
    if len(travel) > 1:
        raise invalid(f"give at most one of version, timestamp and startingVersion (got {', '.join(travel)})")
    if body.endingVersion is not None and body.startingVersion is None:
        raise invalid("endingVersion needs startingVersion")
    predicate = json_predicate(body.jsonPredicateHints)
    if body.jsonPredicateHints is None:
        predicate = sql_predicate(body.predicateHints)
    if body.startingVersion is not None:
        first, last = _range(history, body.startingVersion, body.endingVersion)
        schema_json = who.tables.schema(history, last)
        lines = header_lines(fmt, protocol_line(), metadata_line(history, schema_json, first))
        return _answer(
            who, history, history.files(first, last), (predicate, None), Answer(fmt, lines, first, "add", True)
        )
    version = _snapshot_version(history, body)
    at = version if version is not None else history.latest
    lines = header_lines(fmt, protocol_line(), metadata_line(history, who.tables.schema(history, at), version))
    answer = Answer(fmt, lines, at, "file", version is not None)
    return _answer(who, history, history.files(0, at), (predicate, body.limitHint), answer)


def _changes_range(
    history: TableHistory, starts: tuple[int | None, str | None], ends: tuple[int | None, str | None]
) -> tuple[int, int]:
    (start_version, start_time), (end_version, end_time) = starts, ends
    if (start_version is None) == (start_time is None):
        raise invalid("give one of startingVersion and startingTimestamp")
    if end_version is not None and end_time is not None:
        raise invalid("give at most one of endingVersion and endingTimestamp")
    if start_version is None:
        start_version = history.version_from(parse_timestamp(str(start_time), up=True))
    end = end_version if end_time is None else history.version_at(parse_timestamp(end_time))
    return _range(history, start_version, end)


@router.get(
    TABLE + "/changes",
    operation_id="queryTableChanges",
    summary="The files versions added (NDJSON)",
    response_class=Response,
    responses=table_responses("protocol, metaData, then an add line per file, with its version and timestamp"),
)
@on_workers
def table_changes(
    who: Who,
    share: NAME,
    schema: NAME,
    table: NAME,
    fmt: Format,
    starting_version: Annotated[int | None, Query(alias="startingVersion", ge=0, le=LONG_MAX)] = None,
    starting_timestamp: Annotated[str | None, Query(alias="startingTimestamp", max_length=64)] = None,
    ending_version: Annotated[int | None, Query(alias="endingVersion", ge=0, le=LONG_MAX)] = None,
    ending_timestamp: Annotated[str | None, Query(alias="endingTimestamp", max_length=64)] = None,
    include_historical_metadata: Annotated[bool, Query(alias="includeHistoricalMetadata")] = False,
) -> Response:
    history = _table(who, share, schema, table)
    first, last = _changes_range(history, (starting_version, starting_timestamp), (ending_version, ending_timestamp))
    lines = header_lines(fmt, protocol_line(), metadata_line(history, who.tables.schema(history, last), first))
    return _answer(who, history, history.files(first, last), (None, None), Answer(fmt, lines, first, "add", True))
