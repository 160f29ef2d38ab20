"""Ingest failures as one line: bad input named by file (and record where known), Spark's own
failures reduced to the file it names and its innermost reason, never a Java stack trace."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

#: Longest piece of a bad record or of Spark's reason quoted in an error line.
MAX_QUOTED = 160
_CONDITION = re.compile(r"^\[[A-Z0-9_.]+\]\s*")
_SQLSTATE = re.compile(r"\s*SQLSTATE:\s*\w+\.?\s*$")
_FILE = re.compile(r"(?:reading file|CSV file:|Path does not exist:|path)\s+(\S+?)\.?(?:\s|$)")
# how deep to follow Java causes: real chains are 2-4 long; this bounds a pathological one
_MAX_CAUSES = 20


class IngestError(Exception):
    """Bad input or a failed job. The message is one line; the dataset is unchanged."""


def from_spark(exc: BaseException) -> bool:
    """Whether ``exc`` is Spark's (pyspark's or py4j's) rather than a bug of ours, which stays a bug."""
    return type(exc).__module__.startswith(("pyspark.", "py4j."))


def display_path(uri: str) -> str:
    """A path as Spark names it (``file:/tmp/a%20b.csv``) as the user wrote it (``/tmp/a b.csv``)."""
    for prefix in ("file://", "file:"):
        if uri.startswith(prefix):
            return unquote(uri[len(prefix) :])
    return uri


def quoted(text: str) -> str:
    """A piece of input or message, on one line and bounded."""
    one_line = text if len(text) <= MAX_QUOTED else text[:MAX_QUOTED] + "..."
    return repr(one_line)


def _clean(message: str) -> str:
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    first = _SQLSTATE.sub("", _CONDITION.sub("", lines[0] if lines else "")).strip()
    # Spark's header check says what differs on a later line
    detail = next((line for line in lines[1:] if line.startswith("Expected:")), None)
    return f"{first} {detail}" if detail else first


def _messages(exc: BaseException) -> list[str]:
    """The messages of ``exc`` and of every Java exception behind it, outermost first."""
    java: Any = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    if java is None:
        return [str(exc)]
    out = []
    for _ in range(_MAX_CAUSES):
        if java is None:
            break
        message = java.getMessage()
        out.append(str(message) if message is not None else str(java.getClass().getName()))
        java = java.getCause()
    return out


def innermost_reason(exc: BaseException) -> str:
    """The innermost Java (or Python) message behind ``exc``, on one line and bounded."""
    reasons = [_clean(text) for text in _messages(exc)]
    reasons = [r for r in reasons if r and not r.startswith("Encountered error while reading file")]
    reason = reasons[-1] if reasons else type(exc).__name__
    return reason if len(reason) <= 2 * MAX_QUOTED else reason[: 2 * MAX_QUOTED] + "..."


def spark_failure(exc: BaseException, about: str | None = None) -> IngestError:
    """One line for an exception Spark raised: the file it names (else ``about``, the input being
    read, if given) and the innermost reason."""
    messages = _messages(exc)
    found = next((m for m in (_FILE.search(text) for text in messages) if m is not None), None)
    reason = innermost_reason(exc)
    if found is None:
        return IngestError(f"{about}: {reason}" if about else f"Spark failed: {reason}")
    path = display_path(found.group(1))
    return IngestError(f"{path}: {reason.replace(found.group(1), path)}")
