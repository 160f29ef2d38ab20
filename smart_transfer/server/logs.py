"""The server's logs on stderr: one access line per session and per request, and error lines that
never flood (a rate limit) and never carry a traceback for a client's fault. ``--log-format json``
writes every line as one JSON object."""

from __future__ import annotations

import logging
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


def configure_logging(log_format: str, error_log_rate: float) -> None:
    """Send the access log and the (rate-limited) error log to stderr in ``log_format``."""
    formatter: logging.Formatter = (
        JsonFormatter()
        if log_format == "json"
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    access = logging.StreamHandler(sys.stderr)
    access.setFormatter(formatter)
    ACCESS.handlers[:] = [access]
    ACCESS.setLevel(logging.INFO)
    ACCESS.propagate = False
    errors = logging.StreamHandler(sys.stderr)
    errors.setFormatter(formatter)
    errors.addFilter(ClientFaults())
    errors.addFilter(RateLimit(error_log_rate))
    for name in ERROR_LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers[:] = [errors]
        logger.setLevel(logging.WARNING)
        logger.propagate = False
