"""What the pull flow and the push flow share: the summary they return, progress reporting, and moving
a list of objects through a channel's URLs with keep-alives (their job: ``job.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from msgspec import Struct, field
from msgspec.structs import asdict

from smart_transfer.client.flows.job import FlowJob, ProgressCallback, ProgressUpdate
from smart_transfer.client.transports.base import PullChannel, PushChannel
from smart_transfer.errors import SmartTransferError
from smart_transfer.protocol.messages import ObjectFile
from smart_transfer.transfer.mover import MoveResult, ObjectMover, Transfer
from smart_transfer.transfer.watchdog import NoProgress, ProgressWatchdog

if TYPE_CHECKING:
    from smart_transfer.transfer.transport import ObjectTransport


class TransferSummary(Struct):
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
    #: Of the objects transferred (and their bytes): how many came from peers instead of storage.
    objects_from_peers: int = 0
    bytes_from_peers: int = 0
    #: Peers listed in the plan, and those dropped during the pull with why (never trusted).
    peers_listed: int = 0
    peers_dropped: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    up_to_date: bool = False
    #: A pull found the local dataset ahead of the remote (nothing to pull; push it instead).
    local_ahead: bool = False
    protocol: str = "smart"
    note: str | None = None
    started: float = field(default_factory=time.monotonic)

    def to_dict(self) -> dict[str, object]:
        """The summary as JSON values (what `--json` prints)."""
        data = asdict(self)  # shallow: the one nested field is copied, so the caller's dict is its own
        data.pop("started")
        data["peers_dropped"] = dict(self.peers_dropped)
        return data

    def moved(self, result: MoveResult) -> None:
        """Count what a move of objects did."""
        self.objects_transferred = result.transferred
        self.objects_skipped += result.skipped
        self.bytes_transferred = result.bytes
        self.urls_refreshed = result.refreshed_urls

    def finish(self) -> TransferSummary:
        """Stamp the seconds the operation took; returns this summary."""
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
        #: Told of every change (the phase's progress watchdog), besides the callback.
        self.touch: Callable[[], None] | None = None

    def add_bytes(self, count: int) -> None:
        """Count bytes moved and report progress."""
        self.bytes_done += count
        self._report()

    def add_object(self) -> None:
        """Count one object done and report progress."""
        self.objects_done += 1
        self._report()

    def _report(self) -> None:
        if self.touch is not None:
            self.touch()
        if self.callback is not None:
            self.callback(
                ProgressUpdate(self.operation, self.objects_done, self.objects_total, self.bytes_done, self.bytes_total)
            )


class Wire(Struct, frozen=True):
    """What object transfers run on: the one transport of the move (the channel's ``object_transport``
    chose its HTTP library), and the transfer slots they share (an object holds one; a large object's
    extra ranges or parts take more from the same pool)."""

    transport: ObjectTransport
    slots: asyncio.Semaphore


Work = Callable[[Wire, ObjectFile, Transfer, Meter], Awaitable[int]]
#: What a page of objects needs before it is negotiated (a push's MD5s), computed as the page is asked for.
Prepare = Callable[[Sequence[ObjectFile]], Awaitable[list[ObjectFile]]]


class KeepAlive:
    """Tells the remote, every ``interval`` seconds, how far the transfer is, for as long as the flow
    works between two protocol steps (verifying, moving objects, committing locally). When the
    session ends under it (the server failed it or went away) while objects move, the flow stops at
    once with the server's reason instead of moving objects nobody will commit."""

    def __init__(self, channel: PullChannel | PushChannel, interval: float) -> None:
        self.channel = channel
        self.interval = interval
        self.meter: Meter | None = None
        self._task: asyncio.Task[None] | None = None
        self._owner: asyncio.Task[object] | None = None
        self._interruptible = False
        self._failure: SmartTransferError | None = None
        self._cancelled_owner = False

    async def _beat(self) -> None:
        try:
            while True:
                await asyncio.sleep(self.interval)
                meter = self.meter
                await self.channel.keep_alive(meter.objects_done if meter else 0, meter.bytes_done if meter else 0)
        except SmartTransferError as exc:
            self._failure = exc
            if self._interruptible and self._owner is not None:
                self._cancelled_owner = True
                self._owner.cancel()

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        """While in this block, a session that ends stops the flow (never around a local commit)."""
        self._interruptible = True
        try:
            yield
        finally:
            self._interruptible = False

    async def __aenter__(self) -> KeepAlive:
        self._owner = asyncio.current_task()
        self._task = asyncio.create_task(self._beat())
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.wait({self._task})  # not `await` it: a cancel of our own task must not be swallowed
        if self._cancelled_owner and self._owner is not None and self._failure is not None:
            self._owner.uncancel()  # the one cancel we asked for, whatever became of it
            if exc_type is not None and issubclass(exc_type, asyncio.CancelledError | NoProgress):
                raise self._failure  # the server's reason, not the stop it caused


async def move_objects(
    job: FlowJob,
    beat: KeepAlive,
    files: Sequence[ObjectFile],
    page_limit: int,
    work: Work,
    prepare: Prepare | None = None,
) -> MoveResult:
    """Move ``files`` with ``work`` through URLs the channel hands out, page by page, in parallel,
    while ``beat`` keeps the session alive (its meter counts the progress). ``prepare`` completes each
    page just before it is negotiated: the next page is prepared while this one moves. The bytes move
    over the transport the channel provides (``object_transport``)."""
    if not files:
        return MoveResult()  # a metadata-only pull or push never loads the HTTP stack (~0.3 s)
    meter = beat.meter
    assert meter is not None
    parallel = job.settings.parallel
    async with beat.channel.object_transport(parallel, job.timeouts, job.tools.limiter) as transport:
        wire = Wire(transport, asyncio.Semaphore(parallel))

        async def one(item: ObjectFile, transfer: Transfer) -> int:
            moved = await work(wire, item, transfer, meter)
            meter.add_object()
            return moved

        async def negotiate(page: Sequence[ObjectFile]) -> list[tuple[ObjectFile, Transfer | None]]:
            return await beat.channel.urls(page if prepare is None else await prepare(page))

        page_size = max(1, min(job.settings.page_size, page_limit))
        mover = ObjectMover(negotiate, one, parallel=parallel, page_size=page_size, slots=wire.slots)
        async with watched(job.settings.progress_timeout, meter, mover.outstanding) as mover.watchdog:
            with beat.interruptible():
                return await mover.move(files)


@contextlib.asynccontextmanager
async def watched(
    progress_timeout: float, meter: Meter, outstanding: Callable[[], str]
) -> AsyncIterator[ProgressWatchdog]:
    """A progress watchdog over one phase that moves objects, touched by ``meter``'s progress."""
    async with ProgressWatchdog(progress_timeout, outstanding) as watchdog:
        meter.touch = watchdog.touch
        try:
            yield watchdog
        finally:
            meter.touch = None
