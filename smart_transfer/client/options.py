"""The SDK's bounds in one object, ``ClientOptions``: what ``Client`` and ``SyncClient``, both transports,
``status``, ``ls`` and ``verify`` take. Each bound is declared once (its ``pull``/``push`` flag, help,
default and range: see :mod:`smart_transfer.config`); the data plane's own limits are
``transfer/limits.py``. A light module: ``--help`` reads it without loading the SDK."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from smart_transfer.config import SettingError, check_settings, setting
from smart_transfer.config.units import size
from smart_transfer.protocol import DEFAULT_OBJECTS_PER_PAGE
from smart_transfer.transfer.limits import (
    DEFAULT_ATTEMPTS,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MIN_RATE,
    DEFAULT_PARALLEL,
    DEFAULT_PARALLEL_PARTS,
    DEFAULT_PROGRESS_TIMEOUT,
    DEFAULT_RANGE_SIZE,
    DEFAULT_RANGE_THRESHOLD,
    DEFAULT_READ_TIMEOUT,
    LargeObjects,
    Timeouts,
)

#: Seconds the client waits for any one answer of the server: the WebSocket handshake (after the
#: connect timeout), a session's next message (the server's keep-alives reset it) or a REST answer.
#: Bounds a server that stopped answering.
DEFAULT_ANSWER_TIMEOUT = 120.0
#: Seconds between the keep-alives (Progress) the client sends while objects move, so that the
#: server and any proxy in between (nginx ``proxy_read_timeout``) see a live session.
DEFAULT_KEEPALIVE_INTERVAL = 5.0
#: ``pull --follow``: sessions that drop in a row (server restarted, network cut, session timeout)
#: before following gives up; each is resumed with a normal pull after a backoff from 1 s, doubling,
#: at most 30 s apart. An update received resets the count.
DEFAULT_FOLLOW_RECONNECT_ATTEMPTS = 10
#: Seconds a peer's connectivity result (good or bad) is reused.
DEFAULT_PEER_CHECK_AGE = 30.0
#: The two ways to talk to a server.
PROTOCOLS = ("smart", "simple")
_SECONDS: dict[str, Any] = {"parse": float, "minimum": 0.001, "maximum": 86400, "unit": "seconds"}
_LARGEST = 5 * 1024**4  # S3's largest object


@dataclass(frozen=True)
class ClientOptions:
    """Every bound of a pull, a push, ``status``, ``ls`` and ``verify``; checked when made (a value out of
    range raises ``SettingError``, a ValueError naming the flag and its range)."""

    protocol: str = setting(
        "smart",
        "--protocol",
        "smart: one WebSocket session, objects moved directly to/from storage; "
        "simple: plain REST (one request per block)",
        choices=PROTOCOLS,
    )
    parallel: int = setting(
        DEFAULT_PARALLEL, "--parallel", "concurrent object transfers", parse=int, minimum=1, maximum=1024
    )
    parallel_parts: int = setting(
        DEFAULT_PARALLEL_PARTS,
        "--parallel-parts",
        "ranges (pull) or parts (push) of one large object in flight at once, within --parallel",
        parse=int,
        minimum=1,
        maximum=1024,
    )
    range_threshold: int = setting(
        DEFAULT_RANGE_THRESHOLD,
        "--range-threshold",
        "pull objects larger than this as parallel ranged GETs, resumable range by range (e.g. 64M)",
        parse=size,
        minimum=1,
        maximum=_LARGEST,
        unit="bytes",
    )
    range_size: int = setting(
        DEFAULT_RANGE_SIZE,
        "--range-size",
        "size of those ranges",
        parse=size,
        minimum=1,
        maximum=_LARGEST,
        unit="bytes",
    )
    limit_rate: int | None = setting(
        None,
        "--limit-rate",
        "global bandwidth limit for object transfers, e.g. 500K or 10M (bytes/s; default: unlimited)",
        parse=size,
        minimum=1,
        metavar="RATE",
    )
    page_size: int = setting(
        DEFAULT_OBJECTS_PER_PAGE,
        "--page-size",
        "objects per URL negotiation page the client asks for (the server may allow fewer)",
        parse=int,
        minimum=1,
        maximum=100_000,
    )
    connect_timeout: float = setting(
        DEFAULT_CONNECT_TIMEOUT, "--connect-timeout", "seconds to open a connection", **_SECONDS
    )
    read_timeout: float = setting(
        DEFAULT_READ_TIMEOUT,
        "--read-timeout",
        "seconds storage may send nothing before a transfer attempt counts as stalled",
        **_SECONDS,
    )
    attempts: int = setting(
        DEFAULT_ATTEMPTS,
        "--attempts",
        "attempts per object (stalls, network errors, 5xx)",
        parse=int,
        minimum=1,
        maximum=100,
    )
    min_rate: int = setting(
        DEFAULT_MIN_RATE,
        "--min-rate",
        "slowest rate an object may move at: one attempt lasts at most the two timeouts + size / this rate",
        parse=size,
        minimum=1,
        metavar="RATE",
    )
    answer_timeout: float = setting(
        DEFAULT_ANSWER_TIMEOUT,
        "--answer-timeout",
        "seconds to wait for any one answer of the server, the WebSocket handshake's too (its keep-alives reset it)",
        **_SECONDS,
    )
    progress_timeout: float = setting(
        DEFAULT_PROGRESS_TIMEOUT,
        "--progress-timeout",
        "seconds objects may have no transfer or request in flight and make no progress before the "
        "operation fails, naming what was outstanding (a watchdog over every other bound)",
        **_SECONDS,
    )
    keepalive_interval: float = setting(
        DEFAULT_KEEPALIVE_INTERVAL,
        "--keepalive-interval",
        "seconds between the keep-alives the client sends while objects move",
        **_SECONDS,
    )
    #: Fall back to the simple protocol through the server when storage cannot be reached.
    fallback: bool = True
    #: Fetch objects from the peers a pull plan lists before storage (verified, never trusted).
    peers: bool = True
    #: Seconds a peer's connectivity result is reused.
    peer_check_age: float = DEFAULT_PEER_CHECK_AGE

    #: The bounds of one object transfer (under ``limit_rate``, shared by ``parallel`` transfers), and
    #: how large objects move: derived from the settings above once, when the options are made (a flow
    #: reads them as values, never re-declares them).
    timeouts: Timeouts = field(init=False, repr=False, compare=False)
    large: LargeObjects = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_settings(self)
        if not self.peer_check_age >= 0:
            raise SettingError("peer_check_age must be 0 or more seconds")
        own = Timeouts(self.connect_timeout, self.read_timeout, self.attempts, self.min_rate)
        object.__setattr__(self, "timeouts", own.limited(self.limit_rate, self.parallel))
        object.__setattr__(self, "large", LargeObjects(self.range_threshold, self.range_size, self.parallel_parts))

    def with_values(self, **values: Any) -> ClientOptions:
        """A copy with some values changed (checked the same way)."""
        return replace(self, **values) if values else self

    @property
    def answer_timeouts(self) -> Timeouts:
        """The bounds of a REST call to the server, whose answer may take up to ``answer_timeout``."""
        return replace(self.timeouts, read=max(self.read_timeout, self.answer_timeout))
