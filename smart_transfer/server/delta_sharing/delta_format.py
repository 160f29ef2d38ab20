"""The protocol's two response formats and the choice between them. A client names the formats it reads
in the ``delta-sharing-capabilities`` request header (``responseformat=delta``, or a list such as
``responseformat=delta,parquet``); the answer names the one chosen in the same header. ``parquet`` (the
default) is this server's own lines; ``delta`` wraps the same table, versions, files and presigned URLs
as Delta Lake log actions (``deltaProtocol``, ``deltaMetadata``, ``deltaSingleAction``) that a client
writes into a local ``_delta_log`` and reads with a Delta library (delta-kernel-rs for the Python client).

Every table here is a basic one (reader version 1, no reader feature), so when a list offers parquet
this server answers parquet, as the reference server does; only ``responseformat=delta`` alone (or a
list without parquet) gets the delta format."""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum
from typing import Annotated, Any

from fastapi import Header
from fastapi.responses import Response

from smart_transfer.server.delta_sharing.errors import invalid
from smart_transfer.server.delta_sharing.responses import SignedFile, file_fields, ndjson_answer

CAPABILITIES_HEADER = "delta-sharing-capabilities"
_FORMAT_KEY = "responseformat"
#: The Delta protocol a delta-format answer names: Parquet files, no reader feature (reader version 1);
#: writer version 4 is the one whose tables may record a change data feed.
DELTA_PROTOCOL = {"minReaderVersion": 1, "minWriterVersion": 4}
#: The Delta table property the parquet format's ``enableChangeDataFeed`` stands for.
_CDF_PROPERTY = "delta.enableChangeDataFeed"


class ResponseFormat(StrEnum):
    """The formats of a table answer (metadata, query, changes)."""

    PARQUET = "parquet"
    DELTA = "delta"


def _asked_formats(capabilities: str) -> list[str]:
    """The ``responseformat`` values of a capabilities header (keys and values case-insensitive; other
    capabilities, such as ``readerfeatures``, name nothing this server needs)."""
    for capability in capabilities.split(";"):
        key, equals, values = capability.partition("=")
        if equals and key.strip().lower() == _FORMAT_KEY:
            return [value.strip().lower() for value in values.split(",") if value.strip()]
    return []


async def response_format(
    capabilities: Annotated[
        str | None,
        Header(
            alias=CAPABILITIES_HEADER,
            max_length=1024,
            description="e.g. `responseformat=delta;readerfeatures=deletionvectors`: the answer's format "
            "(`parquet` when absent, or when a list offers it), named again in the answer's header",
        ),
    ] = None,
) -> ResponseFormat:
    """The format a table request asks for (400 when it names only formats this server does not know);
    async: a header parse, no reason to take a thread."""
    asked = _asked_formats(capabilities or "")
    if not asked or ResponseFormat.PARQUET in asked:
        return ResponseFormat.PARQUET
    if ResponseFormat.DELTA in asked:
        return ResponseFormat.DELTA
    known = ", ".join(f.value for f in ResponseFormat)
    raise invalid(f"responseformat {','.join(asked)[:100]!r} is not one this server serves ({known})")


def delta_metadata(line: dict[str, Any]) -> dict[str, Any]:
    """A parquet-format ``metaData`` line as the delta format's: the Delta Metadata action (with the
    table property's Delta name) wrapped with the sharing fields (version, size, numFiles)."""
    fields = dict(line["metaData"])
    wrapper = {key: fields.pop(key) for key in ("version", "size", "numFiles") if key in fields}
    configuration = {_CDF_PROPERTY: fields.pop("configuration").get("enableChangeDataFeed", "false")}
    action = {**fields, "format": {**fields["format"], "options": {}}, "configuration": configuration}
    return {"metaData": {**wrapper, "deltaMetadata": action}}


def header_lines(chosen: ResponseFormat, protocol: dict[str, Any], metadata: dict[str, Any]) -> list[dict[str, Any]]:
    """The two first lines of a table answer (protocol, metaData) in the chosen format."""
    if chosen is ResponseFormat.PARQUET:
        return [protocol, metadata]
    return [{"protocol": {"deltaProtocol": DELTA_PROTOCOL}}, delta_metadata(metadata)]


def file_line(chosen: ResponseFormat, signed: SignedFile, wrapper: str, with_version: bool) -> dict[str, Any]:
    """A file's line: the parquet format's ``{wrapper: fields}``, or the delta format's ``file`` holding the
    same file as a Delta ``add`` whose path is the presigned URL (the sharing fields beside it)."""
    fields = file_fields(signed, with_version)
    if chosen is ResponseFormat.PARQUET:
        return {wrapper: fields}
    add = {
        "path": fields.pop("url"),
        "partitionValues": fields.pop("partitionValues"),
        "size": fields.pop("size"),
        "modificationTime": signed.entry.timestamp_ms,
        "dataChange": True,
        "stats": fields.pop("stats"),
    }
    return {"file": {**fields, "deltaSingleAction": {"add": add}}}


def table_answer(chosen: ResponseFormat, chunks: Iterator[bytes], version: int) -> Response:
    """The NDJSON answer, streamed, naming its format in the capabilities header."""
    answer = ndjson_answer(chunks, version)
    answer.headers[CAPABILITIES_HEADER] = f"{_FORMAT_KEY}={chosen.value}"
    return answer
