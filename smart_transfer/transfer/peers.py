"""Objects from peers (after Venice's blob transfer): workspaces that announced they serve a dataset's
objects (``smart-transfer peer serve``), listed by the server in the pull plan.

Peers are never trusted. Their connectivity is checked in parallel first, and each result is kept with
its time (good or bad) for ``max_age`` seconds, so a bad peer costs one check, not one per pull. The
reachable ones are shuffled (many clients spread over many peers), then each object is asked of them in
turn and written through the caller's verified download (hash and size checked before the object
becomes visible). An object no peer served goes back to the caller, which fetches it from storage:

- the peer does not hold it (404): the next peer;
- the peer is busy (429): the same peer again after a short backoff, a few times, then the next;
- the peer cannot be reached, breaks off mid-transfer or stalls (no byte for the read timeout): the next
  peer, and after a few such failures in a row the peer is dropped for the rest of the pull (and
  remembered as bad);
- the peer sends bytes that do not verify, or any other answer: dropped at once (and remembered as bad).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence

from msgspec import Struct, field

from smart_transfer.protocol.messages import HttpRequest, ObjectFile
from smart_transfer.transfer.backoff import backoff_delay
from smart_transfer.transfer.errors import TransferFailed, TransferRefused, UrlExpired
from smart_transfer.transfer.limits import Timeouts
from smart_transfer.transfer.pieces import in_parallel
from smart_transfer.transfer.transport import ERROR_BODY_BYTES, BodyTooLarge, Call, ObjectTransport

#: Times an object is asked of a busy peer (HTTP 429) before the next source is tried, and the first
#: backoff between them in seconds (doubled each time, with jitter).
PEER_BUSY_ATTEMPTS = 5
PEER_BUSY_DELAY = 0.25
#: Failures to reach a peer, or transfers it broke off, in a row before it is dropped for the pull.
PEER_MAX_FAILURES = 3

#: Moves one object from a request into the workspace, verified; returns its size.
Fetch = Callable[[ObjectFile, HttpRequest], Awaitable[int]]


class PeerHealth:
    """Connectivity results by peer URL, each with the time it was found."""

    def __init__(self, max_age: float) -> None:
        self.max_age = max_age
        self._known: dict[str, tuple[bool, float]] = {}

    def mark(self, url: str, good: bool) -> None:
        self._known[url] = (good, time.monotonic())

    def known(self, url: str) -> bool | None:
        """The last result for ``url`` if it is younger than ``max_age`` (None: check again)."""
        entry = self._known.get(url)
        if entry is None or time.monotonic() - entry[1] > self.max_age:
            return None
        return entry[0]

    async def reachable(self, transport: ObjectTransport, urls: Sequence[str], timeouts: Timeouts) -> list[str]:
        """The peers among ``urls`` that answer, shuffled; those without a fresh result are checked
        in parallel over ``transport``: a GET of the peer's dataset URL, bounded by ``timeouts``
        (connect and read timeouts: a loaded peer is slow to answer, not gone)."""
        stale = [url for url in dict.fromkeys(urls) if self.known(url) is None]
        results = await asyncio.gather(*(self._check(transport, url, timeouts) for url in stale))
        for url, good in zip(stale, results, strict=True):
            self.mark(url, good)
        good_ones = [url for url in dict.fromkeys(urls) if self.known(url)]
        random.shuffle(good_ones)
        return good_ones

    async def _check(self, transport: ObjectTransport, url: str, timeouts: Timeouts) -> bool:
        try:
            answer = await transport.exchange(Call("GET", url, {}, timeouts, 0, ERROR_BODY_BYTES))
        except (OSError, BodyTooLarge):
            return False
        return answer.status in (200, 429)  # a busy peer is alive


class PeerReport(Struct):
    """What the peers did in one pull."""

    objects: int = 0
    bytes: int = 0
    #: Peers dropped during the pull, with why.
    dropped: dict[str, str] = field(default_factory=dict)


class PeerFetcher:
    """Asks ``peers`` (in order) for objects; see the module docstring."""

    def __init__(self, health: PeerHealth, peers: Sequence[str], fetch: Fetch, parallel: int) -> None:
        self.health = health
        self.peers = list(peers)
        self.fetch = fetch
        self.parallel = parallel  # at least 1: ClientOptions checks it once, where it is given
        self.report = PeerReport()
        self._failures: dict[str, int] = {}

    async def fetch_all(self, items: Sequence[ObjectFile]) -> list[ObjectFile]:
        """Fetch what the peers can serve; returns the objects left for storage, in their order."""
        served = await in_parallel(items, self._one, self.parallel)
        return [item for item, done in zip(items, served, strict=True) if not done]

    async def _one(self, item: ObjectFile) -> bool:
        for url in self.peers:
            if url not in self.report.dropped and await self._from(url, item):
                return True
        return False

    async def _from(self, url: str, item: ObjectFile) -> bool:
        request = HttpRequest(method="GET", url=f"{url}/{item.kind}/{item.physical_hash}", headers={}, expires_at=0)
        for attempt in range(1, PEER_BUSY_ATTEMPTS + 1):
            if url in self.report.dropped:
                return False
            try:
                size = await self.fetch(item, request)
            except TransferRefused:
                return False  # a typed refusal (it does not hold the object): the next source
            except UrlExpired:
                self._drop(url, "refused the request (HTTP 403)")
                return False
            except TransferFailed as exc:
                if exc.status == 429 and attempt < PEER_BUSY_ATTEMPTS:
                    await asyncio.sleep(backoff_delay(attempt, PEER_BUSY_DELAY))
                    continue
                self._failed(url, exc)
                return False
            self._failures[url] = 0
            self.report.objects += 1
            self.report.bytes += size
            return True
        return False

    def _failed(self, url: str, exc: TransferFailed) -> None:
        if not (exc.network or exc.stalled):
            self._drop(url, f"the peer {_problem(exc)}")
        elif exc.status == 429:
            return  # busy throughout: alive, but this object goes elsewhere
        else:  # unreachable, broken off, or too slow: maybe loaded, maybe gone
            self._failures[url] = self._failures.get(url, 0) + 1
            if self._failures[url] >= PEER_MAX_FAILURES:
                self._drop(url, f"the peer failed {PEER_MAX_FAILURES} times in a row; last it {_problem(exc)}")

    def _drop(self, url: str, reason: str) -> None:
        self.report.dropped.setdefault(url, reason)
        self.health.mark(url, False)


def _problem(exc: TransferFailed) -> str:
    """What a peer did wrong, in the peer's words (the download's own say "storage", its usual source)."""
    if exc.stalled:
        return f"stopped sending ({exc.object_name})"
    if exc.status is not None:
        return f"answered HTTP {exc.status} for {exc.object_name}"
    if exc.network:
        return f"could not be reached or broke off in the middle of {exc.object_name}"
    return f"served {exc.object_name} with bytes that do not verify (hash or size)"
