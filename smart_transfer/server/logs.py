"""The server's logs on stderr: one access line per session and per request, and error lines that
never flood (a rate limit) and never carry a traceback for a client's fault. ``--log-format json``
writes every line as one JSON object. The event loop never waits for stderr: loggers put lines on a
bounded queue that one thread writes out (``LogSink``); a sink slower than the server (a full pipe, a
stalled collector) costs dropped lines, counted on the next line written, never a stalled server."""

from __future__ import annotations

import copy
import logging
import queue
import sys
import threading
import time
from typing import Any

import orjson

ACCESS = logging.getLogger("smart_transfer.access")
#: The loggers whose lines are errors and warnings (rate-limited).
ERROR_LOGGERS = ("smart_transfer.server", "uvicorn.error", "uvicorn")
#: How many seconds' worth of lines the rate limit lets through at once.
BURST_SECONDS = 10.0
#: Lines waiting for stderr at most (about 3 MB); past it, lines are dropped and counted.
LOG_QUEUE_LINES = 10_000
#: Seconds the way out waits for the queued lines to be written before it goes on without them.
LOG_DRAIN_SECONDS = 2.0


def log_access(kind: str, **fields: Any) -> None:
    """One access line: ``kind`` (session or request) and its fields."""
    ACCESS.info(
        "%s %s",
        kind,
        " ".join(f"{key}={value}" for key, value in fields.items()),
        extra={"fields": {"kind": kind, **fields}},
    )


class RateLimit(logging.Filter):
    """At most ``per_second`` lines a second (bursts of BURST_SECONDS' worth); the first line let
    through after a flood says how many were dropped."""

    def __init__(self, per_second: float) -> None:
        super().__init__()
        self.rate = per_second
        self.capacity = max(1.0, per_second * BURST_SECONDS)
        self.tokens = self.capacity
        self.updated = time.monotonic()
        self.dropped = 0
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        with self._lock:
            now = time.monotonic()
            self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
            self.updated = now
            if self.tokens < 1:
                self.dropped += 1
                return False
            self.tokens -= 1
            dropped, self.dropped = self.dropped, 0
        if dropped:
            record.msg = f"{record.getMessage()} ({dropped} earlier line(s) dropped by the log rate limit)"
            record.args = None
        return True


class ClientFaults(logging.Filter):
    """uvicorn reports some faults of the client (invalid UTF-8 in a text frame, a malformed HTTP
    request) with a traceback: one warning line is what they deserve."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("uvicorn") and record.getMessage().startswith("Invalid"):
            record.exc_info = None
            record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        data.update(getattr(record, "fields", {}))
        if record.exc_info:
            data["traceback"] = self.formatException(record.exc_info)
        return orjson.dumps(data, default=str).decode()


class _Enqueue(logging.Handler):
    """Puts a record on the sink's queue without waiting (the caller may be the event loop); a full
    queue drops it, and the next record that fits says how many went."""

    def __init__(self, lines: queue.Queue[logging.LogRecord | None]) -> None:
        super().__init__()
        self.lines = lines
        self.dropped = 0

    def emit(self, record: logging.LogRecord) -> None:
        record = copy.copy(record)
        record.msg, record.args = record.getMessage(), None  # arguments may change after this call
        # Handler.handle holds the handler's lock around emit: the count is never raced
        if self.dropped:
            record.msg = f"{record.msg} ({self.dropped} earlier line(s) dropped: stderr is slower than the server)"
        try:
            self.lines.put_nowait(record)
        except queue.Full:
            self.dropped += 1
            return
        self.dropped = 0


class LogSink:
    """The one thread that writes the server's log lines to stderr, and the handlers that queue them."""

    def __init__(self, formatter: logging.Formatter) -> None:
        self.lines: queue.Queue[logging.LogRecord | None] = queue.Queue(LOG_QUEUE_LINES)
        self.writer = logging.StreamHandler(sys.stderr)
        self.writer.setFormatter(formatter)
        # a daemon: a sink that never drains must not keep the process from ending
        self.thread = threading.Thread(target=self._write, name="log-sink", daemon=True)
        self.thread.start()

    def handler(self) -> logging.Handler:
        """A handler that queues lines for this sink (filters added to it run in the caller's thread)."""
        return _Enqueue(self.lines)

    def _write(self) -> None:
        while (record := self.lines.get()) is not None:
            self.writer.handle(record)

    def close(self) -> None:
        """Write what is queued, waiting at most LOG_DRAIN_SECONDS."""
        try:
            self.lines.put(None, timeout=LOG_DRAIN_SECONDS)
        except queue.Full:
            return
        self.thread.join(LOG_DRAIN_SECONDS)


def configure_logging(log_format: str, error_log_rate: float) -> LogSink:
    """Send the access log and the (rate-limited) error log to stderr in ``log_format``, through a
    ``LogSink`` the caller closes when the server ends."""
    formatter: logging.Formatter = (
        JsonFormatter()
        if log_format == "json"
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    sink = LogSink(formatter)
    ACCESS.handlers[:] = [sink.handler()]
    ACCESS.setLevel(logging.INFO)
    ACCESS.propagate = False
    errors = sink.handler()
    errors.addFilter(ClientFaults())
    errors.addFilter(RateLimit(error_log_rate))
    for name in ERROR_LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers[:] = [errors]
        logger.setLevel(logging.WARNING)
        logger.propagate = False
    return sink
