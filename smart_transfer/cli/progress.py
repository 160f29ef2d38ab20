"""A one-line progress bar on stderr for terminals (nothing when output is not a terminal)."""

from __future__ import annotations

import sys
import time

from smart_transfer.client.flows.job import ProgressUpdate

#: Seconds between redraws.
REDRAW_INTERVAL = 0.2


def _size(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"


class ProgressBar:
    """Callable progress reporter for the SDK."""

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty()
        self._last = 0.0
        self._started = time.monotonic()
        self._drawn = False

    def __call__(self, update: ProgressUpdate) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self._last < REDRAW_INTERVAL and update.objects_done < update.objects_total):
            return
        self._last = now
        share = update.bytes_done / update.bytes_total if update.bytes_total else 1.0
        width = 24
        bar = "#" * int(share * width) + "-" * (width - int(share * width))
        rate = update.bytes_done / max(now - self._started, 1e-6)
        sys.stderr.write(
            f"\r{update.operation} [{bar}] {update.objects_done}/{update.objects_total} objects "
            f"{_size(update.bytes_done)}/{_size(update.bytes_total)} {_size(rate)}/s "
        )
        sys.stderr.flush()
        self._drawn = True

    def finish(self) -> None:
        if self._drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()
