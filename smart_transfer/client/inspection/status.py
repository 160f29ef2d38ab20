"""``status``: how a workspace dataset relates to its remote, in one round trip and without moving
anything, and ``ls``: the datasets a server lets a token read.

One request, ``GET /{dataset}?block=<local head>``, answers the remote head, its block and record
counts, and whether (and where) the local head is on the remote chain. Whether the remote head is on
the local chain is an index lookup here. Together:

- same head: **same**;
- the remote head is on the local chain: **local-ahead** (push sends the difference);
- the local head is on the remote chain: **remote-ahead** (pull fetches the difference);
- neither: **diverged** (``verify DATASET URL`` walks back to where the histories part);
- no remote dataset: **remote-missing** (a push creates it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass
from functools import partial
from urllib.parse import urlencode

import aiohttp

from smart_transfer.client.inspection.holdings import Holdings
from smart_transfer.client.options import ClientOptions
from smart_transfer.client.remote import RemoteDataset, RemoteServer
from smart_transfer.client.transports.simple import RestClient, RestSession
from smart_transfer.errors import LocalError, RemoteError
from smart_transfer.model import ChainTip, Multihash
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.rest import DatasetInfo, ServerInfo
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.transfer.aio import make_session
from smart_transfer.transfer.pieces import in_parallel

#: Datasets ``ls`` describes at once (one request each).
LS_PARALLEL = 8
#: Datasets asked for in the first page when the caller names no page size: the server describes each
#: (on S3 a read of its head), so the first rows show after a fifth of a default page's work; the
#: pages after it are the server's default size.
FIRST_PAGE_DATASETS = 20
#: How a page's requests are run again (the client's Busy retry).
Page = tuple[list[DatasetInfo], str | None]
Retry = Callable[[Callable[[], Awaitable[Page]]], Awaitable[Page]]

SAME, LOCAL_AHEAD, REMOTE_AHEAD, DIVERGED, REMOTE_MISSING = (
    "same",
    "local-ahead",
    "remote-ahead",
    "diverged",
    "remote-missing",
)


def relation_of(local_only: int, remote_only: int) -> str:
    """The relation of two chains from the blocks only one of them has."""
    if remote_only == 0:
        return SAME if local_only == 0 else LOCAL_AHEAD
    return REMOTE_AHEAD if local_only == 0 else DIVERGED


@dataclass
class DatasetStatus:
    """What ``status`` found (``--json``); block and record counts are None where unknown."""

    dataset: str
    head: str | None
    blocks: int
    records: int
    remote: str
    remote_head: str | None = None
    remote_blocks: int | None = None
    remote_records: int | None = None
    relation: str | None = None
    local_only_blocks: int | None = None
    remote_only_blocks: int | None = None
    #: What the workspace holds when it left objects out by choice (None: it holds everything).
    partial: Holdings | None = None

    def to_dict(self) -> dict[str, object]:
        """The status as JSON values (what `status --json` prints)."""
        return asdict(self)

    def describe(self) -> str:
        """The relation in words."""
        if self.relation == SAME:
            return "up to date with the remote"
        if self.relation == LOCAL_AHEAD:
            return f"ahead of the remote by {self.local_only_blocks} block(s); push sends them"
        if self.relation == REMOTE_AHEAD:
            return f"behind the remote by {self.remote_only_blocks} block(s); pull fetches them"
        if self.relation == DIVERGED:
            return (
                f"diverged from the remote ({self.blocks} local and {self.remote_blocks} remote block(s)); "
                "`verify DATASET URL` shows where the histories part"
            )
        return "the remote has no such dataset; push creates it"


def _compare(status: DatasetStatus, dataset: DatasetRepository, tip: ChainTip | None, info: DatasetInfo) -> None:
    status.remote_head, status.remote_blocks, status.remote_records = info.head, info.blocks, info.records
    local_seq = tip.sequence_number if tip is not None else -1
    remote_tip = dataset.chain_tip_at(Multihash.parse(info.head)) if tip is not None else None
    if remote_tip is not None:  # the remote head is on our chain
        local_only, remote_only = local_seq - remote_tip.sequence_number, 0
    elif info.block is not None and info.block.sequence_number is not None:  # our head is on theirs
        local_only, remote_only = 0, info.blocks - 1 - info.block.sequence_number
    elif tip is None:  # nothing local yet: all of it is the remote's
        local_only, remote_only = 0, info.blocks
    else:
        status.relation = DIVERGED
        return
    status.relation = relation_of(local_only, remote_only)
    status.local_only_blocks, status.remote_only_blocks = local_only, remote_only


async def dataset_status(
    dataset: DatasetRepository, remote: RemoteDataset, token: str | None, options: ClientOptions
) -> DatasetStatus:
    """Compare ``dataset`` (possibly not in the workspace yet) with ``remote`` in one request, bounded by
    ``options`` (connect and answer timeouts)."""
    tip = await asyncio.to_thread(dataset.tip)
    status = DatasetStatus(
        dataset.name,
        str(tip.head) if tip is not None else None,
        tip.sequence_number + 1 if tip is not None else 0,
        tip.next_offset if tip is not None else 0,
        remote.url,
    )
    async with make_session(1, options.answer_timeouts) as http:
        try:
            info = await RestClient(http, remote, token, redirect=True).describe(tip.head if tip else None)
        except RemoteError as exc:
            if exc.code is not ErrorCode.DATASET_NOT_FOUND:
                raise
            if tip is None:
                raise RemoteError(exc.code, f"{dataset.name} is neither in the workspace nor on {remote.url}") from None
            status.relation = REMOTE_MISSING
            return status
    await asyncio.to_thread(_compare, status, dataset, tip, info)
    return status


async def _described_page(
    http: aiohttp.ClientSession, server: RemoteServer, token: str | None, page: tuple[str | None, int | None]
) -> Page:
    """One page of ``GET /?describe=true`` (after ``page[0]``, ``page[1]`` datasets, None: the server's
    default), its datasets described by the server in one request (a server from before ``describe``
    gets a ``GET /{dataset}`` per dataset, LS_PARALLEL at a time, one deleted between the two left out);
    and the next page's token."""
    page_token, limit = page
    asked = {"describe": "true", "page_token": page_token, "limit": limit}
    query = urlencode({key: value for key, value in asked.items() if value is not None})
    listed = await RestSession(http, token).get_model(f"{server.base_url}/?{query}", ServerInfo)
    if listed.described is not None:
        return listed.described, listed.next_page_token

    async def describe(name: str) -> DatasetInfo | None:
        try:
            return await RestClient(http, server.dataset(name), token, redirect=True).describe()
        except RemoteError as exc:
            if exc.code is ErrorCode.DATASET_NOT_FOUND:
                return None
            raise

    found = await in_parallel(listed.datasets, describe, LS_PARALLEL)
    return [info for info in found if info is not None], listed.next_page_token


async def dataset_pages(
    server: RemoteServer, token: str | None, options: ClientOptions, retry: Retry, limit: int | None = None
) -> AsyncIterator[list[DatasetInfo]]:
    """Every dataset of ``server`` the token may read, described, a page at a time as the server pages
    them (following ``next_page_token``; each page run through ``retry``: the Busy retry). ``limit``
    None: FIRST_PAGE_DATASETS in the first page, the server's default after it."""
    async with make_session(LS_PARALLEL, options.answer_timeouts) as http:
        page_token: str | None = None
        size: int | None = limit or FIRST_PAGE_DATASETS
        while True:
            current = page_token
            infos, page_token = await retry(partial(_described_page, http, server, token, (current, size)))
            size = limit
            yield infos
            if page_token is None:
                return
            if page_token == current:
                raise LocalError(ErrorCode.BAD_MESSAGE, f"{server.base_url}/ gave the same page token twice")
