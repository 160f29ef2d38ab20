"""Moves a list of objects through presigned URLs: negotiates pages over the session (the next page
while the current one moves), runs transfers in parallel, and re-requests URLs that are about to
expire (or that the store refused as expired) in batches, so slow transfers still finish. An object
moves with one request, or in parts (a multipart upload: a URL per part); a page names at most
MAX_PARTS parts in all, so that one answer's URLs stay small."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from smart_transfer.protocol.messages import HttpRequest, MultipartUpload, ObjectFile
from smart_transfer.storage.parts import MAX_PARTS
from smart_transfer.transfer.http import TransferFailed, UrlExpired

#: A URL is refreshed when less than this share of its lifetime is left (at most 30 s before expiry).
REFRESH_SHARE = 0.25
MAX_REFRESH_MARGIN = 30.0
#: How often in a row one object may be given fresh URLs that the store refuses before anything more
#: of it moved, before the transfer gives up (a large object that progresses between refusals, part
#: by part or range by range, starts the count again).
MAX_REFRESHES_PER_OBJECT = 5

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


@dataclass
class _Url:
    request: Transfer
    received_at: float

    def stale(self, now: float) -> bool:
        if self.request.expires_at <= 0:
            return False  # a request to the server itself (simple protocol): it does not expire
        lifetime = max(self.request.expires_at - self.received_at, 0.0)
        margin = min(MAX_REFRESH_MARGIN, lifetime * REFRESH_SHARE)
        return self.request.expires_at - now <= margin


@dataclass
class MoveResult:
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
    ) -> None:
        """``slots``: the transfer slots objects take (``parallel`` of them unless given: large
        objects' extra ranges or parts take slots from the same pool, see ``pieces.py``)."""
        self.negotiate = negotiate
        self.work = work
        self.parallel = max(1, parallel)
        self.page_size = max(1, page_size)
        self.slots = slots or asyncio.Semaphore(self.parallel)
        self.result = MoveResult()
        self._urls: dict[ObjectKey, _Url] = {}
        self._pending: dict[ObjectKey, ObjectFile] = {}
        self._refresh_lock = asyncio.Lock()

    async def _ask(self, page: Sequence[ObjectFile]) -> list[tuple[ObjectFile, Transfer | None]]:
        answers = await self.negotiate(page)
        now = time.time()
        for item, request in answers:
            if request is not None:
                self._urls[_key(item)] = _Url(request, now)
        return answers

    async def _refresh(self, item: ObjectFile, force: bool) -> Transfer:
        async with self._refresh_lock:
            current = self._urls[_key(item)]
            now = time.time()
            if not force and not current.stale(now):
                return current.request  # another task refreshed it meanwhile
            batch = [item] + [
                other for key, other in self._pending.items() if key != _key(item) and self._urls[key].stale(now + 1.0)
            ]
            for page in pages(batch, self.page_size):
                answers = await self._ask(page)
                self.result.refreshed_urls += sum(1 for _, r in answers if r is not None)
            return self._urls[_key(item)].request

    async def _one(self, item: ObjectFile, semaphore: asyncio.Semaphore) -> None:
        async with semaphore:
            key = _key(item)
            self._pending.pop(key, None)
            request = self._urls[key].request
            refusals = 0
            while True:
                if self._urls[key].stale(time.time()):
                    request = await self._refresh(item, force=False)
                try:
                    # not `+= await ...`: that reads the total before awaiting and loses updates
                    moved = await self.work(item, request)
                    self.result.bytes += moved
                    self.result.transferred += 1
                    return
                except UrlExpired as refused:
                    self.result.bytes += refused.moved
                    refusals = 0 if refused.moved else refusals + 1
                    if refusals >= MAX_REFRESHES_PER_OBJECT:
                        raise TransferFailed(item.physical_hash, "the store kept refusing fresh URLs") from None
                    request = await self._refresh(item, force=True)

    async def move(self, objects: Sequence[ObjectFile]) -> MoveResult:
        """Move every object; raises the first TransferFailed after the others have stopped."""
        cut = pages(objects, self.page_size)
        semaphore = self.slots
        next_answer: asyncio.Task[list[tuple[ObjectFile, Transfer | None]]] | None = None
        for index, page in enumerate(cut):
            answers = await (next_answer if next_answer is not None else self._ask(page))
            next_answer = None
            work = [item for item, request in answers if request is not None]
            self.result.skipped += len(answers) - len(work)
            for item in work:
                self._pending[_key(item)] = item
            if index + 1 < len(cut):
                # negotiate the next page while this one moves
                next_answer = asyncio.create_task(self._ask(cut[index + 1]))
            tasks = [asyncio.create_task(self._one(item, semaphore)) for item in work]
            try:
                await asyncio.gather(*tasks)
            except BaseException:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                if next_answer is not None:
                    next_answer.cancel()
                    await asyncio.gather(next_answer, return_exceptions=True)
                raise
        return self.result
