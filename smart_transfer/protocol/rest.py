"""The bodies of the simple protocol's describing routes (``GET /`` and ``GET /{dataset}``), as typed
models shared by the server (which answers with them; the OpenAPI document is generated from them)
and the client (which parses ``ls`` and ``status`` answers with them)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ObjectTotals(BaseModel):
    """How many objects of one kind a dataset's chain references, and their bytes."""

    count: int
    bytes: int


class BlockPosition(BaseModel):
    """Where the block named by ``GET /{dataset}?block=`` is on the dataset's chain."""

    hash: str
    sequence_number: int | None = Field(description="its sequence number on the chain; null: not on the chain")


class DatasetInfo(BaseModel):
    """A dataset as ``GET /{dataset}`` describes it."""

    name: str
    dataset_id: str
    head: str
    blocks: int
    records: int
    data: ObjectTotals
    checkpoints: ObjectTotals
    block: BlockPosition | None = Field(
        default=None,
        description="with ?block=HASH: whether and where that block is on the chain (one round trip "
        "tells a client whether its head is behind this one, see `smart-transfer status`)",
    )


class ServerInfo(BaseModel):
    """What ``GET /`` says: the server, and a page of the datasets the token may read (never where they
    are stored), with the token of the next page (None on the last)."""

    server: str
    version: str
    store: str
    datasets: list[str]
    next_page_token: str | None = Field(
        default=None, description="pass it as ?page_token= for the next page; null: this is the last"
    )
    described: list[DatasetInfo] | None = Field(
        default=None,
        description="with ?describe=true: each dataset of the page as GET /{dataset} describes it (one "
        "deleted since it was listed is left out)",
    )
    object_bytes_through_server: int
