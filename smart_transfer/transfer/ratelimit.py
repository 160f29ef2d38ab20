"""A global bandwidth limit shared by all transfers of a client (``--limit-rate``): a token bucket
that every chunk draws from, so N parallel transfers together stay under the rate."""

from __future__ import annotations

import asyncio
import time

#: The bucket holds at most this many seconds of tokens, so bursts after idle time stay short.
BURST_SECONDS = 0.25


class RateLimiter:
    """Async token bucket of ``bytes_per_second``."""

    def __init__(self, bytes_per_second: int) -> None:
        self.rate = float(bytes_per_second)
        self.capacity = max(self.rate * BURST_SECONDS, 1.0)
        self.tokens = self.capacity
        self.updated = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self, count: int) -> None:
        """Wait until ``count`` bytes may move (large counts are paid off over several waits)."""
        async with self._lock:
            remaining = float(count)
            while remaining > 0:
                now = time.monotonic()
                self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
                self.updated = now
                take = min(remaining, self.tokens)
                self.tokens -= take
                remaining -= take
                if remaining > 0:
                    await asyncio.sleep(min(remaining, self.capacity) / self.rate)
