"""What the Delta Sharing OpenAPI document says about the answers: the listing bodies as models, the
NDJSON table answers with their ``Delta-Table-Version`` and format headers, and the protocol's error body for each
status a route may answer."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from smart_transfer.server.delta_sharing.errors import CODE_BY_STATUS


class SharingErrorBody(BaseModel):
    """Every Delta Sharing error answer."""

    errorCode: str = Field(  # noqa: N815
        description="the protocol's code for its statuses (e.g. INVALID_PARAMETER_VALUE, RESOURCE_DOES_NOT_EXIST); "
        "for any other status the server's own code (e.g. MessageTooLarge for 413)"
    )
    message: str
    details: dict[str, Any] | None = Field(
        None, description="the server's typed details of its own code, when it has any (e.g. the limit of a 413)"
    )


class Share(BaseModel):
    name: str


class ListSharesResponse(BaseModel):
    items: list[Share]
    nextPageToken: str | None = None  # noqa: N815 - the protocol's names


class GetShareResponse(BaseModel):
    share: Share


class SharedSchema(BaseModel):
    name: str
    share: str


class ListSchemasResponse(BaseModel):
    items: list[SharedSchema]
    nextPageToken: str | None = None  # noqa: N815


class SharedTable(BaseModel):
    """A table: a dataset (its name with ``.`` written ``__``); ``id`` is the dataset's id."""

    model_config = ConfigDict(populate_by_name=True)

    name: str
    schema_name: str = Field(alias="schema")
    share: str
    id: str


class ListTablesResponse(BaseModel):
    items: list[SharedTable]
    nextPageToken: str | None = None  # noqa: N815


_ERROR_CONTENT = {"application/json": {"schema": {"$ref": "#/components/schemas/SharingErrorBody"}}}
_VERSION_HEADER = {
    "Delta-Table-Version": {"description": "the table version the answer is of", "schema": {"type": "integer"}}
}
_FORMAT_HEADER = {
    "delta-sharing-capabilities": {
        "description": "`responseformat=parquet` or `responseformat=delta`: the format of the lines, chosen by the "
        "request's header of the same name (delta: each line wraps a Delta Lake action, `deltaProtocol`, "
        "`deltaMetadata` or `deltaSingleAction` whose `path` is the presigned URL)",
        "schema": {"type": "string", "enum": ["responseformat=parquet", "responseformat=delta"]},
    }
}
#: The statuses every route may answer (no or unknown token, busy, shutting down).
_ALWAYS = (400, 401, 429, 503)


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the error statuses a route may answer."""
    return {
        status: {"description": CODE_BY_STATUS.get(status, "INTERNAL_ERROR"), "content": _ERROR_CONTENT}
        for status in sorted({*statuses, *_ALWAYS})
    }


def table_responses(description: str, ndjson: bool = True) -> dict[int | str, dict[str, Any]]:
    """A table answer: NDJSON lines (or no body) with the version header, and the table's errors."""
    content = {"application/x-ndjson": {"schema": {"type": "string"}}} if ndjson else {}
    headers = {**_VERSION_HEADER, **_FORMAT_HEADER} if ndjson else _VERSION_HEADER
    return {200: {"description": description, "headers": headers, "content": content}, **errors(403, 404)}
