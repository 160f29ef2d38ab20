"""Bulk decoding without the cyclic garbage collector: decoding a 100,000-block pack allocates half a
million small objects that all stay alive, and each allocation burst would make the collector walk
every one of them again (it doubled the decode time). Blocks hold no reference cycles, so nothing is
lost by pausing the collector for the length of a decode; it runs as usual afterwards.

A process that keeps the decoded blocks for a while (a pull: decode, check, download, commit) can
also keep them out of later collections: ``collector_paused(keep=True)`` freezes what exists when the
body ends (``gc.freeze``: never scanned, still freed when unreferenced) and ``thaw()`` hands it back to
the collector when the operation is done."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused(*, keep: bool = False) -> Iterator[None]:
    """Pause the cyclic garbage collector for the body (nested uses, in one thread or several, are
    fine: only a use that found it enabled turns it back on). ``keep``: freeze the objects alive when
    the body ends, so the collector does not walk them (once right away, then again and again as
    they age) until ``thaw()``."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if keep:
            gc.freeze()
        if was_enabled:
            gc.enable()


def thaw() -> None:
    """Give objects frozen by ``collector_paused(keep=True)`` back to the collector."""
    gc.unfreeze()
