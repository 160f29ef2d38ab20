"""The protocol's answers: JSON listings with page tokens, and the NDJSON lines of table answers
(protocol, metaData, file / add) with the ``Delta-Table-Version`` header."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from fastapi.responses import Response, StreamingResponse

from smart_transfer.repo.footer_stats import SliceStats
from smart_transfer.server.delta_sharing.errors import invalid
from smart_transfer.server.delta_sharing.spark_schema import schema_string
from smart_transfer.server.delta_sharing.tables import TableHistory, TableVersion
from smart_transfer.server.workers import iterate_on_workers

NDJSON = "application/x-ndjson; charset=utf-8"
VERSION_HEADER = "Delta-Table-Version"
#: Most items one listing page holds, and the page size when ``maxResults`` is absent.
MAX_RESULTS = 1000
_TOKEN_PREFIX = "st1:"


def ndjson_bytes(lines: Iterable[dict[str, Any]]) -> bytes:
    """Lines of an NDJSON answer: one JSON object per line."""
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


def ndjson_answer(chunks: Iterator[bytes], version: int) -> StreamingResponse:
    """An NDJSON table answer, sent chunk by chunk as ``chunks`` makes them (chunked transfer encoding:
    an answer cut short by an error is seen as cut short, never as complete; see ``stream.py``)."""
    return StreamingResponse(iterate_on_workers(chunks), media_type=NDJSON, headers={VERSION_HEADER: str(version)})


def version_answer(version: int) -> Response:
    """The table-version answer: the header only."""
    return Response(b"", headers={VERSION_HEADER: str(version)})


def protocol_line() -> dict[str, Any]:
    return {"protocol": {"minReaderVersion": 1}}


def metadata_line(history: TableHistory, schema: dict[str, Any], version: int | None) -> dict[str, Any]:
    """The table's metadata (``version`` when the request named one)."""
    at = version if version is not None else history.latest
    metadata: dict[str, Any] = {
        "id": history.table_id,
        "name": history.dataset,
        "format": {"provider": "parquet"},
        "schemaString": schema_string(schema),
        "partitionColumns": [],
        "configuration": {"enableChangeDataFeed": "true"},
        "size": history.size_upto(at),
        "numFiles": history.file_count(0, at),
    }
    if version is not None:
        metadata["version"] = version
    return {"metaData": metadata}


@dataclass(frozen=True, slots=True)
class SignedFile:
    """A table file, its statistics and the presigned GET that reads it."""

    entry: TableVersion
    stats: SliceStats
    url: str
    expires_at: int


def file_fields(signed: SignedFile, with_version: bool) -> dict[str, Any]:
    """A file's fields: id (its physical hash, stable), size, its footer's statistics, URL and expiry."""
    data = signed.entry.data
    assert data is not None
    fields: dict[str, Any] = {
        "url": signed.url,
        "id": str(data.physical_hash),
        "partitionValues": {},
        "size": data.size,
        "stats": orjson.dumps(signed.stats.to_delta()).decode(),
        "expirationTimestamp": signed.expires_at * 1000,
    }
    if with_version:
        fields["version"] = signed.entry.version
        fields["timestamp"] = signed.entry.timestamp_ms
    return fields


def page_token(listing: str, last: str) -> str:
    """An opaque token: resume ``listing`` after the item named ``last``."""
    return base64.urlsafe_b64encode(f"{_TOKEN_PREFIX}{listing}:{last}".encode()).decode()


def _after(listing: str, token: str | None) -> str | None:
    if token is None or token == "":
        return None
    try:
        text = base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, UnicodeError, ValueError):
        raise invalid("pageToken is not a token this server gave") from None
    prefix = f"{_TOKEN_PREFIX}{listing}:"
    if not text.startswith(prefix):
        raise invalid("pageToken is not a token of this listing")
    return text[len(prefix) :]


def page(listing: str, names: Sequence[str], max_results: int | None, token: str | None) -> tuple[list[str], str]:
    """One page of sorted ``names``: those after the token's, at most ``max_results`` (0: none, as the
    protocol allows, with the token of the page it did not give when there are names left); and the next
    token ('' when no names are left)."""
    if max_results is not None and not 0 <= max_results <= MAX_RESULTS:
        raise invalid(f"maxResults must be 0..{MAX_RESULTS}")
    size = MAX_RESULTS if max_results is None else max_results
    after = _after(listing, token)
    remaining = [name for name in sorted(names) if after is None or name > after]
    chosen = remaining[:size]
    if len(remaining) <= size:
        return chosen, ""
    return chosen, page_token(listing, chosen[-1] if chosen else after or "")


def listing_body(items: list[dict[str, Any]], next_token: str) -> dict[str, Any]:
    """A listing's JSON body (``nextPageToken`` only when there is a next page)."""
    body: dict[str, Any] = {"items": items}
    if next_token:
        body["nextPageToken"] = next_token
    return body
