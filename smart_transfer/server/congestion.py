"""How late the server runs its work: the signal of an overloaded server, as opposed to a slow store.

A server process past its own capacity (its CPU, Python's one interpreter lock shared by the event loop and
the worker threads) makes every request wait before it runs: in the event loop, whose callbacks run late,
and in the worker pool's queue. Operation durations show it only against a baseline, and a baseline learnt
under that load calls it usual; this delay needs none. A timer asks to wake every ``DELAY_TICK_SECONDS`` and
measures how late it woke (the loop's lag: work that arrived meanwhile waited half of it on average); with
it, the worker queue's oldest wait is read; the larger of the two is averaged exponentially over about
``DELAY_SMOOTHING_SECONDS``, so that one slow callback (a collection, a large answer) does not count as
overload. The adaptive admission limit reads the average (server/adaptive.py), and ``/metrics`` shows it."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable

log = logging.getLogger(__name__)

#: Seconds between the delay's samples.
DELAY_TICK_SECONDS = 0.05
#: The time constant of the delay's average, seconds.
DELAY_SMOOTHING_SECONDS = 1.0


class ServerDelay:
    """The server's recent delay, seconds (see the module's docstring). ``queue_wait`` tells how long the
    oldest call in the worker queue has waited."""

    def __init__(self, queue_wait: Callable[[], float]) -> None:
        self.queue_wait = queue_wait
        self.seconds = 0.0

    def record(self, late: float, elapsed: float) -> None:
        """One sample: the timer woke ``late`` seconds late, ``elapsed`` seconds after the last sample.
        Work that arrived during those ``elapsed`` seconds waited ``late / 2`` on average: that is the
        sample (one stall of a second is half a second of delay over that second, not a whole one)."""
        sample = max(0.0, late / 2, self.queue_wait())
        weight = 1.0 - math.exp(-max(elapsed, 0.0) / DELAY_SMOOTHING_SECONDS)
        self.seconds += weight * (sample - self.seconds)

    def __call__(self) -> float:
        return self.seconds

    def stopped(self, task: asyncio.Task[None]) -> None:
        """The watcher ended: cancelled at shutdown, or by an error, which is logged; either way the
        delay is 0 from then on (a frozen value above the target would hold the limits down)."""
        self.seconds = 0.0
        if not task.cancelled() and task.exception() is not None:
            log.error("the server-delay watcher stopped: %s; admission no longer sees the delay", task.exception())

    async def watch(self) -> None:
        """Sample until cancelled (the server's lifespan runs it)."""
        loop = asyncio.get_running_loop()
        before = loop.time()
        while True:
            await asyncio.sleep(DELAY_TICK_SECONDS)
            now = loop.time()
            self.record(now - before - DELAY_TICK_SECONDS, now - before)
            before = now
