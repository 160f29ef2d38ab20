"""Bulk decoding without the cyclic garbage collector: decoding a 100,000-block pack allocates half a
million small objects that all stay alive, and each allocation burst would make the collector walk
every one of them again (it doubled the decode time). Blocks hold no reference cycles, so nothing is
lost by pausing the collector for the length of a decode; it runs as usual afterwards.

Library code owns only that scope: it pauses the collector and turns it back on if it found it on, and
never freezes or unfreezes the heap. A process that embeds the SDK keeps its own collector policy; the
console script sets one for the command-line process (``cli/heap.py``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the body (nested uses, in one thread or several, are
    fine: only a use that found it enabled turns it back on, so a process that turned it off keeps it
    off)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
