"""``pull --follow`` across sessions: the follow flow (``pull.follow``) runs in one session; when that
session drops (the server restarts or shuts down, the network breaks, the session timeout ends it), the
follower waits a backoff and starts again with a normal pull, which catches up with everything that
happened meanwhile, then follows on. Errors that a new session would meet again (diverged histories, a
refused token, bad input) end it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from smart_transfer.client.flows.moving import TransferSummary
from smart_transfer.errors import SmartTransferError
from smart_transfer.protocol.codes import RETRYABLE
from smart_transfer.transfer.backoff import backoff_delay
from smart_transfer.transfer.errors import TransferFailed

#: First wait before a dropped session is resumed, and the longest (seconds); doubled each time.
FOLLOW_RECONNECT_DELAY = 1.0
MAX_FOLLOW_RECONNECT_DELAY = 30.0

Report = Callable[[TransferSummary], None]
#: Runs one following session, reporting each pull; returns when ``stop`` was set.
Session = Callable[[Report], Awaitable[None]]


def dropped(exc: BaseException) -> bool:
    """Whether a failed session is worth resuming: the connection or the server failed, not the request."""
    if isinstance(exc, SmartTransferError):
        return exc.code in RETRYABLE
    if isinstance(exc, TransferFailed):
        return exc.network or exc.stalled
    return False


class Follower:
    """Runs following sessions until ``stop`` is set (see the module docstring)."""

    def __init__(
        self, session: Session, on_update: Report, stop: asyncio.Event, warn: Callable[[str], None], attempts: int
    ) -> None:
        self.session = session
        self.on_update = on_update
        self.stop = stop
        self.warn = warn
        self.attempts = attempts
        self.updates = 0
        self._failures = 0

    def _report(self, summary: TransferSummary) -> None:
        self.updates += 1
        self._failures = 0
        self.on_update(summary)

    async def run(self, name: str) -> int:
        """Follow ``name``; returns the number of updates reported."""
        while not self.stop.is_set():
            try:
                await self.session(self._report)
                break
            except (SmartTransferError, TransferFailed) as exc:
                if not dropped(exc) or self._failures >= self.attempts:
                    raise
                self._failures += 1
                delay = backoff_delay(self._failures, FOLLOW_RECONNECT_DELAY, MAX_FOLLOW_RECONNECT_DELAY)
                self.warn(f"{name}: the session ended ({exc}); resuming with a pull in {delay:.1f} s")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self.stop.wait()
        return self.updates
