"""Table answers streamed: the protocol and metaData lines are sent as soon as the request is checked, then
the file lines FILES_PER_CHUNK at a time, each chunk's statistics looked up (or read from footers), its
hints applied and its URLs presigned only when it is written. A query's memory is one chunk's, however
many files the table has, and ``limitHint`` stops reading statistics once enough rows are kept.

Everything a request can get wrong (names, versions, timestamps, hints, schema) is checked before the
first line, so it still gets its 4xx. A failure after the first line (a store that stops answering while
footers are read, an object lost since the commit) cannot change the 200 already sent: the server logs
it and aborts the connection without the chunked encoding's last chunk, so the client sees a truncated
answer and fails (the ``delta-sharing`` client reads the whole body first: ``requests`` raises
``ChunkedEncodingError``); it never sees a complete-looking answer with files missing."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, TypeVar

from smart_transfer.repo.footer_stats import SliceStats
from smart_transfer.server.delta_sharing.hints import Predicate, prune
from smart_transfer.server.delta_sharing.responses import ndjson_bytes
from smart_transfer.server.delta_sharing.tables import TableHistory, Tables, TableVersion

log = logging.getLogger(__name__)
T = TypeVar("T")
#: Files per streamed chunk: a chunk's lines (about 1.5 KiB each, mostly the presigned URL) are what a
#: query holds in memory.
FILES_PER_CHUNK = 500


def batches(items: Iterator[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last one shorter)."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def kept_files(
    tables: Tables,
    history: TableHistory,
    entries: Iterator[TableVersion],
    hints: tuple[Predicate | None, int | None],
) -> Iterator[list[tuple[TableVersion, SliceStats]]]:
    """The files the hints keep (``hints.prune``: a predicate, else a limit in rows), with their
    statistics, a chunk at a time."""
    predicate, limit = hints
    rows = 0
    for batch in batches(entries, FILES_PER_CHUNK):
        stats = tables.stats(history, [entry.data for entry in batch if entry.data is not None])
        remaining = None if limit is None else limit - rows
        kept = prune(list(zip(batch, stats, strict=True)), stats, predicate, remaining)
        if kept:
            yield kept
        if predicate is None and limit is not None:
            rows += sum(numbers.num_records for _, numbers in kept)
            if rows >= limit:
                return


def streamed(header: list[dict[str, Any]], files: Iterator[list[dict[str, Any]]], what: str) -> Iterator[bytes]:
    """The answer's bytes: the header lines at once, then each chunk of file lines as it is made. A
    failure after the first line is logged and raised again, which aborts the connection (see above)."""
    yield ndjson_bytes(header)
    try:
        for lines in files:
            yield ndjson_bytes(lines)
    except Exception:
        log.exception("%s: the answer failed after its first line; the client gets a truncated stream", what)
        raise
