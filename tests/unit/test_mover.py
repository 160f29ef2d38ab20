"""The object mover signs URLs just before use: a short queue of signed URLs that grows while the
workers outrun the negotiation, never the whole list at once; failures stop the other transfers."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Sequence

import pytest

from smart_transfer.model import SHA3_256, Multihash
from smart_transfer.protocol.messages import HttpRequest, ObjectFile
from smart_transfer.transfer.errors import TransferFailed
from smart_transfer.transfer.mover import INITIAL_URLS_PER_WORKER, ObjectMover


def objects(count: int) -> list[ObjectFile]:
    return [
        ObjectFile(
            kind="data", physical_hash=str(Multihash(SHA3_256, hashlib.sha3_256(str(i).encode()).digest())), size=1
        )
        for i in range(count)
    ]


class Signer:
    """A negotiation that records how many signed URLs were waiting, unused, at each page."""

    def __init__(self, skip: bool = False, lifetime: int = 600) -> None:
        self.skip = skip
        self.lifetime = lifetime
        self.pages: list[int] = []
        self.signed = 0
        self.started = 0
        self.most_waiting = 0

    async def negotiate(self, page: Sequence[ObjectFile]) -> list[tuple[ObjectFile, HttpRequest | None]]:
        await asyncio.sleep(0.001)  # a round trip
        self.pages.append(len(page))
        if self.skip:
            return [(item, None) for item in page]
        self.signed += len(page)
        self.most_waiting = max(self.most_waiting, self.signed - self.started)
        expires = int(time.time()) + self.lifetime
        return [(item, HttpRequest(method="GET", url="http://x/", headers={}, expires_at=expires)) for item in page]

    async def work(self, item: ObjectFile, request: HttpRequest) -> int:
        self.started += 1
        await asyncio.sleep(0.002)
        return item.size


def test_urls_are_signed_shortly_before_use() -> None:
    signer = Signer()
    mover = ObjectMover(signer.negotiate, signer.work, parallel=4, page_size=1000)
    result = asyncio.run(mover.move(objects(400)))
    assert result.transferred == 400 and result.skipped == 0
    assert signer.signed == 400, "no URL was signed twice"
    # the old mover signed a whole page (all 400) before the first transfer; now the queue is short
    assert signer.pages[0] == 4 * INITIAL_URLS_PER_WORKER
    assert signer.most_waiting < 400 // 2, signer.pages


def test_the_page_grows_when_the_server_holds_everything() -> None:
    signer = Signer(skip=True)
    mover = ObjectMover(signer.negotiate, signer.work, parallel=16, page_size=1000)
    result = asyncio.run(mover.move(objects(10_000)))
    assert result.skipped == 10_000 and result.transferred == 0
    assert signer.pages[:3] == [32, 64, 128]
    assert len(signer.pages) <= 20, "a resumed push must not cost one round trip per 32 objects"


def test_pages_never_exceed_the_page_size() -> None:
    signer = Signer()
    mover = ObjectMover(signer.negotiate, signer.work, parallel=8, page_size=10)
    asyncio.run(mover.move(objects(200)))
    assert max(signer.pages) <= 10 and sum(signer.pages) == 200


def test_a_failure_stops_the_others_and_is_raised() -> None:
    signer = Signer()
    started: list[str] = []

    async def work(item: ObjectFile, request: HttpRequest) -> int:
        started.append(item.physical_hash)
        if len(started) == 5:
            raise TransferFailed(item.physical_hash, "broken")
        await asyncio.sleep(0.01)
        return 1

    mover = ObjectMover(signer.negotiate, work, parallel=4, page_size=1000)
    with pytest.raises(TransferFailed, match="broken"):
        asyncio.run(mover.move(objects(1000)))
    assert len(started) < 100, "the other transfers stopped"
