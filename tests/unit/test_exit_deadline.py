"""A stopping server's process ends by its deadline whatever it still waits for (here: the interpreter
joining a thread that never ends), the deadline only ever moves closer, and a process that ends in
time is not held back by it."""

from __future__ import annotations

import subprocess
import sys
import time

#: A process that arms its deadline, then would wait two minutes for a non-daemon thread at exit.
STUCK = """
import threading, time
from smart_transfer.server.exit_deadline import EXIT_DEADLINE
EXIT_DEADLINE.arm(30, "the first wait")
EXIT_DEADLINE.arm(0.5, "the stop")  # closer: taken
EXIT_DEADLINE.arm(60, "a later wait")  # later: ignored
threading.Thread(target=time.sleep, args=(120,)).start()
"""

#: A process that arms a far deadline and then ends at once.
QUICK = """
from smart_transfer.server.exit_deadline import EXIT_DEADLINE
EXIT_DEADLINE.arm(60, "the stop")
assert EXIT_DEADLINE.armed
"""


def _run(code: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    return done, time.monotonic() - started


def test_a_process_stuck_on_its_way_out_ends_at_the_nearest_deadline_with_one_line() -> None:
    done, elapsed = _run(STUCK)
    assert done.returncode == 1, done
    assert done.stderr.splitlines() == ["smart-transfer: error: the stop took over 0.5 s; exiting"], done.stderr
    assert elapsed < 20, elapsed  # the 30 s and 60 s deadlines and the 120 s thread were never waited for


def test_a_process_that_ends_in_time_is_not_held_by_its_deadline() -> None:
    done, elapsed = _run(QUICK)
    assert done.returncode == 0 and done.stderr == "", done
    assert elapsed < 30, elapsed
