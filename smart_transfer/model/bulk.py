"""Bulk decoding without the cyclic garbage collector: decoding a 100,000-block pack allocates half a
million small objects that all stay alive, and each allocation burst would make the collector walk
every one of them again (it doubled the decode time). Blocks hold no reference cycles, so nothing is
lost by pausing the collector for the length of a decode; it runs as usual afterwards.

Library code owns only that scope: it pauses the collector and puts back what it found, and never
freezes or unfreezes the heap (a process that embeds the SDK keeps its own collector policy; only the
console script, ``cli/main.py``, sets one for the command-line process)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_paused = 0  # scopes open now, in every thread
_found_enabled = False  # what the first of them found, put back by the last


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the body. Nested and concurrent uses (in one thread or
    several) share one pause: the first to enter notes whether the collector was enabled, the last to
    leave puts that back, so the collector is never left off by an overlap, nor turned on when the
    process had turned it off."""
    global _paused, _found_enabled
    with _lock:
        if _paused == 0:
            _found_enabled = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _lock:
            _paused -= 1
            if _paused == 0 and _found_enabled:
                gc.enable()
