"""Moves a list of objects through presigned URLs, signed just before use: ``parallel`` workers take
objects from a short queue of signed URLs, and the queue is refilled over the session (one page at a
time) whenever it runs low. The page grows while the workers outrun the negotiation (or the server
skips what it holds) and shrinks when URLs would wait in the queue long enough to go stale, so URLs
are seldom re-signed even with short lifetimes. URLs that are about to expire anyway (a slow object)
or that the store refused as expired are re-requested in batches, so slow transfers still finish. An
object moves with one request, or in parts (a multipart upload: a URL per part); a page names at most
MAX_PARTS parts in all, so that one answer's URLs stay small."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

from msgspec import Struct, field

from smart_transfer.protocol.messages import HttpRequest, MultipartUpload, ObjectFile
from smart_transfer.storage.parts import MAX_PARTS
from smart_transfer.transfer.errors import TransferFailed, UrlExpired, refused_fresh_urls
from smart_transfer.transfer.watchdog import ProgressWatchdog

#: A URL is refreshed when less than this share of its lifetime is left (at most 30 s before expiry).
REFRESH_SHARE = 0.25
MAX_REFRESH_MARGIN = 30.0
#: How often in a row one object may be given fresh URLs that the store refuses before anything more
#: of it moved, before the transfer gives up (a large object that progresses between refusals, part
#: by part or range by range, starts the count again).
MAX_REFRESHES_PER_OBJECT = 5
#: Signed URLs waiting for a worker, per worker, before the first page: the queue starts at this
#: times ``parallel`` and doubles (up to the page size) whenever a worker finds it empty.
INITIAL_URLS_PER_WORKER = 2

#: How long a failed move waits for its other transfers to stop before it reports the failure.
STOP_GRACE_SECONDS = 10.0

ObjectKey = tuple[str, str]


def _key(item: ObjectFile) -> ObjectKey:
    """Objects are told apart by kind and hash (a data and a checkpoint object may share bytes)."""
    return (item.kind, item.physical_hash)


#: How one object moves: one request, or a multipart upload (a request per part).
Transfer = HttpRequest | MultipartUpload
Negotiate = Callable[[Sequence[ObjectFile]], Awaitable[list[tuple[ObjectFile, Transfer | None]]]]
Work = Callable[[ObjectFile, Transfer], Awaitable[int]]


def pages(objects: Sequence[ObjectFile], page_size: int) -> list[Sequence[ObjectFile]]:
    """``objects`` cut into pages of at most ``page_size`` objects and MAX_PARTS parts in all."""
    cut: list[Sequence[ObjectFile]] = []
    start, parts = 0, 0
    for index, item in enumerate(objects):
        weight = len(item.part_md5s or ())
        if index > start and (index - start >= page_size or parts + weight > MAX_PARTS):
            cut.append(objects[start:index])
            start, parts = index, 0
        parts += weight
    if start < len(objects):
        cut.append(objects[start:])
    return cut


class _Url(Struct):
    request: Transfer
    received_at: float

    def stale(self, now: float) -> bool:
        if self.request.expires_at <= 0:
            return False  # a request to the server itself (simple protocol): it does not expire
        lifetime = max(self.request.expires_at - self.received_at, 0.0)
        margin = min(MAX_REFRESH_MARGIN, lifetime * REFRESH_SHARE)
        return self.request.expires_at - now <= margin


class MoveResult(Struct):
    transferred: int = 0
    skipped: int = 0
    bytes: int = 0
    refreshed_urls: int = 0
    failures: list[TransferFailed] = field(default_factory=list)


class ObjectMover:
    """Moves objects with ``work`` using URLs from ``negotiate`` (None from negotiate: skip)."""

    def __init__(
        self,
        negotiate: Negotiate,
        work: Work,
        *,
        parallel: int,
        page_size: int,
        slots: asyncio.Semaphore | None = None,
        watchdog: ProgressWatchdog | None = None,
    ) -> None:
        """``slots``: the transfer slots objects take (``parallel`` of them unless given: large
        objects' extra ranges or parts take slots from the same pool, see ``pieces.py``);
        ``watchdog``: told of every transfer and negotiation in flight (see ``watchdog.py``)."""
        self.negotiate = negotiate
        self.work = work
        self.parallel = parallel  # at least 1: ClientOptions checks it once, where it is given
        self.page_size = max(1, page_size)
        self.slots = slots or asyncio.Semaphore(self.parallel)
        self.result = MoveResult()
        self.watchdog = watchdog
        self._total = 0
        self._negotiated = 0
        self._moving: set[str] = set()
        self._urls: dict[ObjectKey, _Url] = {}
        self._ready: deque[ObjectFile] = deque()  # signed, not yet started
        self._window = min(self.page_size, self.parallel * INITIAL_URLS_PER_WORKER)
        self._changed = asyncio.Condition()
        self._negotiated_all = False
        #: Set once the move fails: the producer stops even if a cancellation never reached it
        #: (an awaited answer that arrives with the cancellation can swallow it).
        self._stopped = False
        self._pages = 0  # pages delivered to the queue
        self._grown_for = 0  # the page after which the queue last grew for a starving worker
        self._refresh_lock = asyncio.Lock()

    def _flight(self) -> contextlib.AbstractContextManager[None]:
        return self.watchdog.in_flight() if self.watchdog is not None else contextlib.nullcontext()

    def outstanding(self) -> str:
        """What is left of the move, for an error that stops it."""
        moving = sorted(self._moving)[:3]
        return (
            f"{self.result.transferred} of {self._total} objects moved, {len(self._ready)} signed and waiting, "
            f"{self._total - self._negotiated} not yet negotiated, {len(self._moving)} moving"
            + (f" ({', '.join(moving)})" if moving else "")
        )

    async def _ask(self, page: Sequence[ObjectFile]) -> list[tuple[ObjectFile, Transfer | None]]:
        with self._flight():
            answers = await self.negotiate(page)
        now = time.time()
        for item, request in answers:
            if request is not None:
                self._urls[_key(item)] = _Url(request, now)
        return answers

    async def _produce(self, objects: Sequence[ObjectFile]) -> None:
        """Negotiate pages as the queue of signed URLs runs low (the next page while this one moves)."""
        start = 0
        while start < len(objects):
            async with self._changed:
                # refill when half the window is left: the answer arrives before the workers run dry
                await self._changed.wait_for(lambda: self._stopped or len(self._ready) <= self._window // 2)
            if self._stopped:
                return
            page = pages(objects[start : start + self._window], self.page_size)[0]
            start += len(page)
            answers = await self._ask(page)
            self._negotiated += len(page)
            work = [item for item, request in answers if request is not None]
            self.result.skipped += len(answers) - len(work)
            if not work:
                self._grow()  # everything held already: nothing to wait for, ask for more at once
            async with self._changed:
                self._ready.extend(work)
                self._pages += 1
                self._changed.notify_all()
        async with self._changed:
            self._negotiated_all = True
            self._changed.notify_all()

    def _grow(self) -> None:
        self._window = min(self.page_size, self._window * 2)

    async def _next(self) -> ObjectFile | None:
        async with self._changed:
            if not self._ready and not self._negotiated_all and self._pages > self._grown_for:
                # the workers outran the negotiation: sign more per page (once per page delivered)
                self._grown_for = self._pages
                self._grow()
            await self._changed.wait_for(lambda: bool(self._ready) or self._negotiated_all or self._stopped)
            if not self._ready or self._stopped:
                return None
            item = self._ready.popleft()
            self._changed.notify_all()
            return item

    async def _refresh(self, item: ObjectFile, force: bool) -> Transfer:
        async with self._refresh_lock:
            current = self._urls[_key(item)]
            now = time.time()
            if not force and not current.stale(now):
                return current.request  # another task refreshed it meanwhile
            queued = [other for other in self._ready if self._urls[_key(other)].stale(now + 1.0)]
            if queued:
                # URLs went stale while they waited: the queue is too long for their lifetime
                self._window = min(self.page_size, max(self.parallel, self._window // 2))
            for page in pages([item, *queued], self.page_size):
                answers = await self._ask(page)
                self.result.refreshed_urls += sum(1 for _, r in answers if r is not None)
            return self._urls[_key(item)].request

    async def _one(self, item: ObjectFile) -> None:
        async with self.slots:
            key = _key(item)
            request = self._urls[key].request
            refusals = 0
            while True:
                if self._urls[key].stale(time.time()):
                    with self._flight():
                        request = await self._refresh(item, force=False)
                try:
                    # not `+= await ...`: that reads the total before awaiting and loses updates
                    with self._flight():
                        self._moving.add(item.physical_hash)
                        try:
                            moved = await self.work(item, request)
                        finally:
                            self._moving.discard(item.physical_hash)
                    self.result.bytes += moved
                    self.result.transferred += 1
                    return
                except UrlExpired as refused:
                    self.result.bytes += refused.moved
                    refusals = 0 if refused.moved else refusals + 1
                    if refusals >= MAX_REFRESHES_PER_OBJECT:
                        reason = refused_fresh_urls(refused.refusal, refusals)
                        raise TransferFailed(item.physical_hash, reason) from None
                    with self._flight():
                        request = await self._refresh(item, force=True)

    async def _worker(self) -> None:
        while (item := await self._next()) is not None:
            await self._one(item)

    async def move(self, objects: Sequence[ObjectFile]) -> MoveResult:
        """Move every object; raises the first failure after the other transfers have stopped."""
        self._total = len(objects)
        tasks = [asyncio.create_task(self._produce(objects))]
        tasks += [asyncio.create_task(self._worker()) for _ in range(self.parallel)]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            await self._stop(tasks)
            raise
        return self.result

    async def _stop(self, tasks: list[asyncio.Task[None]]) -> None:
        """Stop every task of a failed move: cancelled, and told by the stop flag (a task that lost
        its cancellation ends at its next wait); waits at most STOP_GRACE_SECONDS for them."""
        self._stopped = True
        for task in tasks:
            task.cancel()
        async with self._changed:
            self._changed.notify_all()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(STOP_GRACE_SECONDS):
                await asyncio.gather(*tasks, return_exceptions=True)
