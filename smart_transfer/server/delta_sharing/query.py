"""The body of a Delta Sharing query, read and checked here rather than by FastAPI, so each fault gets the
protocol's words: a body that is not UTF-8, not JSON, or JSON that is not an object is 400
``MALFORMED_REQUEST``; an object whose fields have the wrong type or range is 400
``INVALID_PARAMETER_VALUE`` (``{"version": true}``, ``{"version": "1"}``, ``{"limitHint": "5"}``,
``{"predicateHints": "x"}``, ``{"timestamp": 5}``: types are strict, as the protocol defines them: a
boolean or a string is no number, a number no string, and an integer fits the protocol's Int32 or Long);
an empty body is the query with no field."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from smart_transfer.server.delta_sharing.errors import MALFORMED_REQUEST, SharingError, invalid

#: Most bytes of a query body read (the largest valid one, 100 SQL hints and a 64 KiB JSON hint, is smaller).
MAX_QUERY_BODY_BYTES = 1024 * 1024
#: The protocol's integer types: ``limitHint`` is an Int32, versions are Longs.
INT32_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


class QueryRequest(BaseModel):
    """The query body: every field optional (fields this server does not know are ignored)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    predicateHints: list[str] | None = Field(default=None, max_length=100)  # noqa: N815 - the protocol's names
    jsonPredicateHints: str | None = Field(default=None, max_length=65536)  # noqa: N815
    limitHint: int | None = Field(default=None, ge=0, le=INT32_MAX)  # noqa: N815
    version: int | None = Field(default=None, ge=0, le=LONG_MAX)
    timestamp: str | None = Field(default=None, max_length=64)
    startingVersion: int | None = Field(default=None, ge=0, le=LONG_MAX)  # noqa: N815
    endingVersion: int | None = Field(default=None, ge=0, le=LONG_MAX)  # noqa: N815


#: The route's documented request body (the route reads it itself: see ``query_body``).
QUERY_BODY_DOCUMENT: dict[str, Any] = {
    "requestBody": {
        "required": False,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/QueryRequest"}}},
    }
}


#: How a message names the JSON value a body holds instead of an object.
JSON_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def malformed(message: str) -> SharingError:
    """400 MALFORMED_REQUEST."""
    return SharingError(400, message, MALFORMED_REQUEST)


async def query_body(request: Request) -> QueryRequest:
    """The request's query body, checked as the module says."""
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_QUERY_BODY_BYTES:
            raise SharingError(413, f"the query body exceeds {MAX_QUERY_BODY_BYTES} bytes")
    if not raw.strip():
        return QueryRequest()
    try:
        value = orjson.loads(bytes(raw).decode("utf-8"))
    except UnicodeDecodeError:
        raise malformed("the query body is not UTF-8") from None
    except orjson.JSONDecodeError as exc:
        raise malformed(f"the query body is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise malformed(f"the query body must be a JSON object, not {JSON_KINDS.get(type(value), 'that')}")
    try:
        return QueryRequest.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise invalid(f"{where}: {first['msg']}") from None
