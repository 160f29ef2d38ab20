"""The data plane's limits and bounds that callers (and ``--help``) need without importing the HTTP
stack: parallelism, how large objects are split, and how long any one wait on storage may last."""

from __future__ import annotations

from dataclasses import dataclass, replace

from smart_transfer.transfer.backoff import longest_backoff

#: Parallel transfers unless the caller says otherwise.
DEFAULT_PARALLEL = 16
#: Seconds to open a TCP connection (to storage, or to the server).
DEFAULT_CONNECT_TIMEOUT = 5.0
#: Seconds storage may send no byte, once a request is sent, before the attempt counts as stalled.
DEFAULT_READ_TIMEOUT = 10.0
#: Attempts per object for transient failures (stalls, connection errors, 5xx, 429).
DEFAULT_ATTEMPTS = 3
#: The slowest an object may move (bytes/s) before its attempt fails: one attempt may last at most
#: connect + read timeouts + size / this rate (a trickle that never stalls long enough for the read
#: timeout still ends). Lowered to limit-rate / parallel under ``--limit-rate``.
DEFAULT_MIN_RATE = 32 * 1024
#: Objects up to this size are downloaded into memory and uploaded from one read; larger ones stream
#: through a file.
SMALL_OBJECT_BYTES = 1024 * 1024
#: Downloaded objects up to this size are written on the event loop (cheaper than a thread hand-off
#: per object); larger small objects are written by a worker thread, so a slow disk or their MD5
#: does not hold up the other transfers.
INLINE_WRITE_BYTES = 64 * 1024
#: First retry delay in seconds; doubled each attempt, with jitter (0.5x-1.5x).
RETRY_BASE_DELAY = 0.25
#: Objects larger than this are downloaded as parallel ranged GETs into a preallocated staging file.
DEFAULT_RANGE_THRESHOLD = 64 * 1024 * 1024
#: The size of those ranges (each one is a request, retried and resumed on its own).
DEFAULT_RANGE_SIZE = 32 * 1024 * 1024
#: Seconds an operation's object phase may have nothing in flight and make no progress before it fails
#: (the progress watchdog, ``watchdog.py``).
DEFAULT_PROGRESS_TIMEOUT = 30.0
#: Bytes per read or write of a streamed object body (one sink call or file read per MiB).
STREAM_CHUNK_BYTES = 1024 * 1024
#: Bytes of a streamed download that may wait for its writer thread (``writer.py``) before the loop
#: waits for it: the memory a download may hold beyond what the disk took.
WRITE_QUEUE_BYTES = 4 * 1024 * 1024
#: Ranges (downloads) or parts (multipart uploads) of one object in flight at once; they share the
#: ``--parallel`` connections with every other transfer.
DEFAULT_PARALLEL_PARTS = 8


@dataclass(frozen=True)
class LargeObjects:
    """How the client moves large objects: downloads above ``range_threshold`` in ranges of
    ``range_size``; ranges or parts (uploads, cut by the server) ``parallel_parts`` at a time."""

    range_threshold: int = DEFAULT_RANGE_THRESHOLD
    range_size: int = DEFAULT_RANGE_SIZE
    parallel_parts: int = DEFAULT_PARALLEL_PARTS

    def __post_init__(self) -> None:
        if self.range_threshold < 1 or self.range_size < 1 or self.parallel_parts < 1:
            raise ValueError("the range threshold, range size and parallel parts must be at least 1")


@dataclass(frozen=True)
class Timeouts:
    """How long one object transfer may wait, and how often it is tried."""

    connect: float = DEFAULT_CONNECT_TIMEOUT
    read: float = DEFAULT_READ_TIMEOUT
    attempts: int = DEFAULT_ATTEMPTS
    min_rate: float = DEFAULT_MIN_RATE

    def __post_init__(self) -> None:
        if self.connect <= 0 or self.read <= 0 or self.min_rate <= 0 or self.attempts < 1:
            raise ValueError("timeouts and the minimum rate must be positive, attempts at least 1")

    def once(self) -> Timeouts:
        """These bounds with a single attempt (a caller that retries by itself)."""
        return replace(self, attempts=1)

    def limited(self, bytes_per_second: int | None, parallel: int) -> Timeouts:
        """These bounds under a global bandwidth limit shared by ``parallel`` transfers."""
        if not bytes_per_second:
            return self
        return replace(self, min_rate=min(self.min_rate, bytes_per_second / max(1, parallel)))

    def object_seconds(self, size: int) -> float:
        """The longest one attempt at an object of ``size`` bytes may last."""
        return self.connect + self.read + size / self.min_rate

    def stall_bound(self) -> float:
        """Seconds within which a store that stopped answering fails an object: every attempt waits
        at most connect + read timeouts, plus the longest backoff between attempts."""
        backoff = sum(longest_backoff(n, RETRY_BASE_DELAY) for n in range(1, self.attempts))
        return self.attempts * (self.connect + self.read) + backoff
