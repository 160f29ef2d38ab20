"""The last bound on a stopping server: once it has been told to stop, the process ends by a deadline
whatever it is still waiting for.

Every wait of the drain has its own bound, but a few waits of the way out are not the server's: when
start-up is interrupted uvicorn skips the lifespan's bounded stop, and then ``asyncio.run`` joins the
default executor's threads, and the interpreter joins every thread pool, without a bound. A thread
stuck in a store call would keep the process alive after Ctrl-C. The deadline is a daemon timer armed
when the stop begins; it writes one line and ends the process with exit status 1.
"""

from __future__ import annotations

import os
import threading
import time

#: Seconds a stopping server may take beyond its own bounded waits (the drain, the worker pool's
#: stop) for the rest of its way out: the event loop's and the interpreter's teardown.
EXIT_MARGIN_SECONDS = 5.0
#: Exit status of a process the deadline ended (its stop did not finish in time).
EXIT_STATUS = 1


class ExitDeadline:
    """A process-wide deadline that can only move closer: arming it again later never extends it.

    ``arm`` is called from signal handlers, so it takes no lock (a handler could interrupt the main
    thread inside it); two timers may then run, and the earlier one ends the process."""

    def __init__(self) -> None:
        self._at: float | None = None

    @property
    def armed(self) -> bool:
        """Whether a deadline is set."""
        return self._at is not None

    def arm(self, seconds: float, waiting_for: str) -> None:
        """End the process ``seconds`` from now unless it has exited by then (or an earlier deadline
        is already set); the line it then writes says it was ``waiting_for`` something."""
        at = time.monotonic() + seconds
        if self._at is not None and self._at <= at:
            return
        self._at = at
        line = f"smart-transfer: error: {waiting_for} took over {seconds:g} s; exiting\n"
        timer = threading.Timer(seconds, _expire, args=(line,))
        timer.daemon = True  # never what keeps the process alive
        timer.name = "exit-deadline"
        timer.start()


def _expire(line: str) -> None:
    try:
        os.write(2, line.encode())
    finally:
        os._exit(EXIT_STATUS)


#: The one deadline of this process.
EXIT_DEADLINE = ExitDeadline()
