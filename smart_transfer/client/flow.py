"""What the pull flow and the push flow share: their options, the summary they return, progress
reporting, and moving a list of objects through a channel's URLs with keep-alives."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field

import aiohttp

from smart_transfer.client.errors import SmartTransferError
from smart_transfer.client.transport import PullChannel, PushChannel
from smart_transfer.model import Multihash, ObjectKind, ObjectRef
from smart_transfer.protocol.messages import HttpRequest, ObjectFile
from smart_transfer.transfer.http import DEFAULT_PARALLEL, make_session
from smart_transfer.transfer.mover import MoveResult, ObjectMover
from smart_transfer.transfer.ratelimit import RateLimiter

#: Objects per negotiation page the client asks for (the server may allow fewer; 1000 by default).
DEFAULT_PAGE_SIZE = 1000
#: Seconds between keep-alives the client sends while objects move.
PROGRESS_INTERVAL = 5.0


@dataclass(frozen=True)
class ProgressUpdate:
    """Where a transfer stands; passed to the ``progress`` callback."""

    operation: str
    objects_done: int
    objects_total: int
    bytes_done: int
    bytes_total: int


ProgressCallback = Callable[[ProgressUpdate], None]


@dataclass
class FlowOptions:
    """How a flow moves objects."""

    parallel: int = DEFAULT_PARALLEL
    page_size: int = DEFAULT_PAGE_SIZE
    limiter: RateLimiter | None = None
    progress: ProgressCallback | None = None


@dataclass
class TransferSummary:
    """What one pull or push did (the CLI's ``--json`` output)."""

    operation: str
    dataset: str
    remote: str
    old_head: str | None
    new_head: str | None
    blocks: int = 0
    objects_transferred: int = 0
    objects_skipped: int = 0
    bytes_transferred: int = 0
    urls_refreshed: int = 0
    objects_repaired: int = 0
    seconds: float = 0.0
    up_to_date: bool = False
    protocol: str = "smart"
    note: str | None = None
    started: float = field(default_factory=time.monotonic, repr=False)

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data.pop("started")
        return data

    def moved(self, result: MoveResult) -> None:
        self.objects_transferred = result.transferred
        self.objects_skipped += result.skipped
        self.bytes_transferred = result.bytes
        self.urls_refreshed = result.refreshed_urls

    def finish(self) -> TransferSummary:
        self.seconds = round(time.monotonic() - self.started, 3)
        return self


class Meter:
    """Counts progress for the callback."""

    def __init__(self, operation: str, files: Sequence[ObjectFile], callback: ProgressCallback | None) -> None:
        self.operation = operation
        self.objects_total = len(files)
        self.bytes_total = sum(f.size for f in files)
        self.objects_done = 0
        self.bytes_done = 0
        self.callback = callback

    def add_bytes(self, count: int) -> None:
        self.bytes_done += count
        self._report()

    def add_object(self) -> None:
        self.objects_done += 1
        self._report()

    def _report(self) -> None:
        if self.callback is not None:
            self.callback(
                ProgressUpdate(self.operation, self.objects_done, self.objects_total, self.bytes_done, self.bytes_total)
            )


def object_file(ref: ObjectRef, md5: str | None = None) -> ObjectFile:
    return ObjectFile(kind=ref.kind.value, physical_hash=str(ref.physical_hash), size=ref.size, md5=md5)


def object_ref(item: ObjectFile) -> ObjectRef:
    return ObjectRef(ObjectKind(item.kind), Multihash.parse(item.physical_hash), item.size)


Work = Callable[[aiohttp.ClientSession, ObjectFile, HttpRequest, Meter], Awaitable[int]]


async def move_objects(
    options: FlowOptions,
    channel: PullChannel | PushChannel,
    operation: str,
    files: Sequence[ObjectFile],
    page_limit: int,
    work: Work,
) -> MoveResult:
    """Move ``files`` with ``work`` through URLs the channel hands out, page by page, in parallel,
    keeping the session alive meanwhile."""
    meter = Meter(operation, files, options.progress)
    async with make_session(options.parallel) as http:

        async def one(item: ObjectFile, request: HttpRequest) -> int:
            moved = await work(http, item, request, meter)
            meter.add_object()
            return moved

        page_size = max(1, min(options.page_size, page_limit))
        mover = ObjectMover(channel.urls, one, parallel=options.parallel, page_size=page_size)

        async def keep_alive() -> None:
            while True:
                await asyncio.sleep(PROGRESS_INTERVAL)
                await channel.keep_alive(meter.objects_done, meter.bytes_done)

        beating = asyncio.create_task(keep_alive())
        try:
            return await mover.move(files)
        finally:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError, SmartTransferError):
                await beating
