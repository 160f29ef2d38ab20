"""The progress watchdog of an operation's object phase: a guarantee that does not depend on every
wait being right. Each transfer attempt, URL negotiation or peer check is bounded by its own
timeouts while it is *in flight*; what no timeout can catch is a lost wakeup, where nothing is in
flight and nothing moves (a task waiting for a notification that never comes, a cancellation an
awaited answer swallowed). The watchdog fails the operation when nothing has been in flight and
nothing has progressed for ``limit`` seconds, naming what was outstanding.

It also fails the operation when a callback of the event loop raised: asyncio would only log such an
exception, and the transfers that callback was to complete would wait forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from smart_transfer.transfer.errors import TransferFailed


class NoProgress(TransferFailed):
    """The watchdog ended an operation that stopped progressing (or lost a loop callback)."""

    def __str__(self) -> str:
        return f"{self.reason}; nothing was committed: run it again to resume"


class ProgressWatchdog:
    """Watches one phase of an operation (``async with``); ``in_flight()`` marks each bounded wait,
    ``touch()`` each sign of progress. ``outstanding()`` says what was left when it fires."""

    def __init__(self, limit: float, outstanding: Callable[[], str]) -> None:
        self.limit = limit
        self.outstanding = outstanding
        self._last = time.monotonic()
        self._flying = 0
        self._owner: asyncio.Task[Any] | None = None
        self._task: asyncio.Task[None] | None = None
        self._fired: NoProgress | None = None
        self._previous_handler: Any = None

    def touch(self) -> None:
        """Something progressed: bytes moved, an object finished, an answer came."""
        self._last = time.monotonic()

    @contextlib.contextmanager
    def in_flight(self) -> Iterator[None]:
        """A bounded wait is under way (its own timeouts end it); progress at its start and end."""
        self._flying += 1
        self.touch()
        try:
            yield
        finally:
            self._flying -= 1
            self.touch()

    def _fire(self, error: NoProgress) -> None:
        if self._fired is None and self._owner is not None:
            self._fired = error
            self._owner.cancel()

    async def _watch(self) -> None:
        tick = min(1.0, self.limit / 4)
        while True:
            await asyncio.sleep(tick)
            idle = time.monotonic() - self._last
            if self._flying == 0 and idle >= self.limit:
                reason = f"no progress for {idle:.0f} s with nothing in flight ({self.outstanding()})"
                self._fire(NoProgress("operation", reason))
                return

    def _on_loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if self._owner is None:  # this phase ended; a handler left behind only passes reports on
            self._pass_on(loop, context)
            return
        what = f"{type(exc).__name__}: {exc}" if exc is not None else str(context.get("message"))
        self._fire(NoProgress("operation", f"internal error in an event-loop callback ({what})"))
        self._pass_on(loop, context)

    def _pass_on(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """Report as the loop would have without this watchdog."""
        if self._previous_handler is not None:
            self._previous_handler(loop, context)
        else:
            loop.default_exception_handler(context)

    async def __aenter__(self) -> ProgressWatchdog:
        loop = asyncio.get_running_loop()
        self._owner = asyncio.current_task()
        self._previous_handler = loop.get_exception_handler()
        loop.set_exception_handler(self._on_loop_error)
        self.touch()
        self._task = asyncio.create_task(self._watch())
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        loop = asyncio.get_running_loop()
        if loop.get_exception_handler() == self._on_loop_error:
            loop.set_exception_handler(self._previous_handler)  # (another watchdog may have replaced ours)
        assert self._task is not None
        self._task.cancel()
        await asyncio.wait({self._task})  # not `await` it: a cancel of our own task must not be swallowed
        owner, self._owner = self._owner, None
        if self._fired is not None and owner is not None:
            owner.uncancel()  # the one cancel we asked for, whatever became of it
            if exc_type is None or issubclass(exc_type, asyncio.CancelledError):
                raise self._fired  # else the error the phase ended with says more
