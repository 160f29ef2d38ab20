"""``pull --follow`` on the server: watch a dataset's head and tell a following session when it moves.

One watcher per followed dataset and replica reads the head from the store (shared by every replica),
from ``poll_min`` seconds after a change, doubling while nothing changes, up to ``poll_max``; a push
committed through this replica wakes it at once. So a follower sees a push through its own replica
within milliseconds and one through another replica within ``poll_max`` seconds, and an idle followed
dataset costs one head read per ``poll_max`` seconds per replica, however many sessions follow it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from smart_transfer.model import Multihash
from smart_transfer.protocol.messages import DatasetPullComplete, DatasetPullHeadMoved, DatasetPullRequest, Progress
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.errors import RepositoryError
from smart_transfer.server.session import ServerSession
from smart_transfer.storage import StorageError

log = logging.getLogger("smart_transfer.server.follow")


@dataclass
class _Watched:
    """What the watcher of one dataset knows, and the sessions waiting on it."""

    head: Multihash | None = None
    polled: bool = False
    waiters: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class HeadWatch:
    """The head watchers of one server process (see the module docstring)."""

    def __init__(self, poll_min: float, poll_max: float) -> None:
        self.poll_min = poll_min
        self.poll_max = max(poll_min, poll_max)
        self._watched: dict[str, _Watched] = {}

    def notify(self, name: str) -> None:
        """A push moved ``name``'s head through this process: read it now."""
        watched = self._watched.get(name)
        if watched is not None:
            watched.wake.set()

    async def moved(self, dataset: DatasetRepository, known: Multihash | None) -> Multihash:
        """Wait until ``dataset``'s head is a block other than ``known``; return it."""
        watched = self._watched.get(dataset.name)
        if watched is None:
            watched = self._watched[dataset.name] = _Watched()
            watched.task = asyncio.create_task(self._poll(dataset, watched))
        watched.waiters += 1
        try:
            while not (watched.polled and watched.head is not None and watched.head != known):
                await watched.changed.wait()
            assert watched.head is not None
            return watched.head
        finally:
            watched.waiters -= 1
            if not watched.waiters and self._watched.get(dataset.name) is watched:
                del self._watched[dataset.name]
                assert watched.task is not None
                watched.task.cancel()

    async def _poll(self, dataset: DatasetRepository, watched: _Watched) -> None:
        delay = self.poll_min
        while True:
            watched.wake.clear()  # before the read: a push committed during it wakes the next one
            head = watched.head
            try:
                head = await asyncio.to_thread(dataset.head)
            except (StorageError, RepositoryError) as exc:
                log.warning("follow: cannot read the head of %s: %s", dataset.name, exc)
            if not watched.polled or head != watched.head:
                watched.head, watched.polled = head, True
                watched.changed.set()
                watched.changed = asyncio.Event()
                delay = self.poll_min
            else:
                delay = min(delay * 2, self.poll_max)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await watched.wake.wait()


async def follow(
    session: ServerSession,
    watch: HeadWatch,
    dataset: DatasetRepository,
    known: Multihash,
    interval: float,
    tick: Callable[[], Awaitable[None]],
) -> DatasetPullRequest | None:
    """The Following phase of a pull session: wait for the head to move past ``known`` while both sides
    send keep-alives (``tick`` runs before each of the server's, every ``interval`` seconds, and may
    end the session by raising); then send DatasetPullHeadMoved and return the client's next request
    (None: the client ended the session)."""
    receiving = asyncio.create_task(session.expect(DatasetPullComplete))
    moving = asyncio.create_task(watch.moved(dataset, known))
    try:
        while not moving.done():
            done, _ = await asyncio.wait({receiving, moving}, timeout=interval, return_when=asyncio.FIRST_COMPLETED)
            if receiving in done:
                receiving.result()  # raises when the client went away or broke the order
                return None
            if not done:
                await tick()
                await session.send(Progress(objects_done=0, bytes_done=0))
        receiving.cancel()  # a WebSocket receive is cancel-safe: no frame is lost
        await asyncio.wait({receiving})
        if not receiving.cancelled():
            receiving.result()
            return None  # the client ended just as the head moved
        await session.send(DatasetPullHeadMoved(head=str(moving.result())))
        message = await session.expect(DatasetPullRequest, DatasetPullComplete)
        return message if isinstance(message, DatasetPullRequest) else None
    finally:
        for task in (receiving, moving):
            task.cancel()
        await asyncio.gather(receiving, moving, return_exceptions=True)
