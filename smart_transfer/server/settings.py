"""Every server setting, with its default; ``smart-transfer serve --help`` shows the same values."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from smart_transfer.storage.base import DEFAULT_MAX_CONNECTIONS as DEFAULT_S3_MAX_CONNECTIONS
from smart_transfer.storage.base import DEFAULT_URL_TTL_SECONDS, MAX_URL_TTL_SECONDS
from smart_transfer.storage.parts import (
    DEFAULT_MULTIPART_THRESHOLD,
    DEFAULT_PART_SIZE,
    MAX_OBJECT_BYTES,
    MAX_PART_BYTES,
    MAX_SINGLE_PUT_BYTES,
    MIN_PART_BYTES,
)
from smart_transfer.storage.s3_defaults import DEFAULT_S3_ATTEMPTS, DEFAULT_S3_CONNECT_TIMEOUT, DEFAULT_S3_READ_TIMEOUT

if TYPE_CHECKING:  # the CLI reads the defaults above for --help: the stores load only when used
    from smart_transfer.storage import ObjectStore
    from smart_transfer.storage.local import LocalStore

__all__ = [
    "DEFAULT_MULTIPART_THRESHOLD",
    "DEFAULT_PART_SIZE",
    "DEFAULT_S3_ATTEMPTS",
    "DEFAULT_S3_CONNECT_TIMEOUT",
    "DEFAULT_S3_READ_TIMEOUT",
    "DEFAULT_URL_TTL_SECONDS",
    "ServerSettings",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
DEFAULT_ROOT = Path(".smart-transfer/server")
#: Largest object the server accepts (S3's limit, 5 TiB). One PUT carries at most 5 GiB on every store;
#: larger objects are uploaded in parts (``--multipart-threshold``, ``--part-size``).
DEFAULT_MAX_OBJECT_BYTES = MAX_OBJECT_BYTES
#: Most objects one transfer-negotiation page may name.
DEFAULT_MAX_OBJECTS_PER_PAGE = 1000
#: Largest WebSocket message (text or binary) the server accepts.
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: Seconds a session may wait for the client's next message.
DEFAULT_IDLE_TIMEOUT_SECONDS = 120.0
#: Seconds between the keep-alives (Progress) the server sends while it verifies and commits a push.
DEFAULT_KEEPALIVE_INTERVAL_SECONDS = 5.0
#: Longest a whole session may last (also bounds how long a push may hold uploads uncommitted).
DEFAULT_SESSION_TIMEOUT_SECONDS = 3600.0
#: Concurrent WebSocket sessions, in all and per token subject.
DEFAULT_MAX_SESSIONS = 64
DEFAULT_MAX_SESSIONS_PER_TOKEN = 8
#: Concurrent REST requests, in all and per token subject.
DEFAULT_MAX_REQUESTS = 256
DEFAULT_MAX_REQUESTS_PER_TOKEN = 64
#: The retry hint sent with a busy answer.
DEFAULT_BUSY_RETRY_AFTER_SECONDS = 2
#: Open connections (HTTP and WebSocket, idle keep-alive ones included); more are answered 503 and closed.
DEFAULT_MAX_CONNECTIONS = 512
#: Seconds a client may take to send a request's headers (from connecting, or from the request's
#: first byte on a kept-alive connection); slower ones are closed.
DEFAULT_HEADER_TIMEOUT_SECONDS = 10.0
#: Seconds an idle kept-alive HTTP connection stays open.
DEFAULT_KEEP_ALIVE_SECONDS = 30.0
#: Seconds running sessions and requests may take to finish after SIGTERM before they are ended.
DEFAULT_SHUTDOWN_GRACE_SECONDS = 30.0
#: Seconds the readiness probe (``GET /readyz``) waits for the store before it answers "not ready".
DEFAULT_READY_TIMEOUT_SECONDS = 2.0
#: Addresses whose X-Forwarded-For / X-Forwarded-Proto headers are trusted (a load balancer's).
DEFAULT_FORWARDED_ALLOW_IPS = "127.0.0.1"
#: Access and error log lines: text or json (one object per line).
LOG_FORMATS = ("text", "json")
DEFAULT_LOG_FORMAT = "text"
#: Error log lines per second the server writes at most (bursts of 10x are allowed), so a flood of
#: bad frames cannot flood the log; what it drops is counted in a line when the flood ends.
DEFAULT_ERROR_LOG_RATE = 20.0
#: Seconds a peer announcement (``pull --announce``) stays listed after the pull that made it (a
#: following session renews its own while it lasts).
DEFAULT_PEER_TTL_SECONDS = 600.0
#: Most live peers one pull plan lists (newest announcements first; the client shuffles them).
DEFAULT_MAX_PEERS_LISTED = 8
#: ``pull --follow``: how often the server reads a followed dataset's head from the store, from the
#: shortest interval after a change, doubling while nothing changes, up to the longest. Pushes through
#: the same replica wake the followers at once; pushes through another replica are seen within the
#: longest interval.
DEFAULT_FOLLOW_POLL_MIN_SECONDS = 0.5
DEFAULT_FOLLOW_POLL_MAX_SECONDS = 2.0
#: Lifetime of the presigned URLs a Delta Sharing query answers with. Delta Sharing clients (the Python
#: one) cannot ask for fresh URLs mid-read, so they must outlive a whole read; capped by the stores'
#: longest URL lifetime (``MAX_URL_TTL_SECONDS``, 7 days).
DEFAULT_SHARING_URL_TTL_SECONDS = 3600
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True)
class ServerSettings:
    """How the server stores data and what it allows."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    root: Path = DEFAULT_ROOT
    public_url: str | None = None
    s3_endpoint: str | None = None
    s3_public_endpoint: str | None = None
    s3_bucket: str | None = None
    s3_prefix: str = ""
    s3_region: str | None = None
    s3_max_connections: int = DEFAULT_S3_MAX_CONNECTIONS
    s3_connect_timeout: float = DEFAULT_S3_CONNECT_TIMEOUT
    s3_read_timeout: float = DEFAULT_S3_READ_TIMEOUT
    s3_attempts: int = DEFAULT_S3_ATTEMPTS
    url_ttl_seconds: int = DEFAULT_URL_TTL_SECONDS
    max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES
    multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD
    part_size: int = DEFAULT_PART_SIZE
    max_objects_per_page: int = DEFAULT_MAX_OBJECTS_PER_PAGE
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    idle_timeout_seconds: float = DEFAULT_IDLE_TIMEOUT_SECONDS
    session_timeout_seconds: float = DEFAULT_SESSION_TIMEOUT_SECONDS
    keepalive_interval_seconds: float = DEFAULT_KEEPALIVE_INTERVAL_SECONDS
    max_sessions: int = DEFAULT_MAX_SESSIONS
    max_sessions_per_token: int = DEFAULT_MAX_SESSIONS_PER_TOKEN
    max_requests: int = DEFAULT_MAX_REQUESTS
    max_requests_per_token: int = DEFAULT_MAX_REQUESTS_PER_TOKEN
    busy_retry_after_seconds: int = DEFAULT_BUSY_RETRY_AFTER_SECONDS
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    header_timeout_seconds: float = DEFAULT_HEADER_TIMEOUT_SECONDS
    keep_alive_seconds: float = DEFAULT_KEEP_ALIVE_SECONDS
    shutdown_grace_seconds: float = DEFAULT_SHUTDOWN_GRACE_SECONDS
    ready_timeout_seconds: float = DEFAULT_READY_TIMEOUT_SECONDS
    forwarded_allow_ips: str = DEFAULT_FORWARDED_ALLOW_IPS
    log_format: str = DEFAULT_LOG_FORMAT
    error_log_rate: float = DEFAULT_ERROR_LOG_RATE
    peer_ttl_seconds: float = DEFAULT_PEER_TTL_SECONDS
    max_peers_listed: int = DEFAULT_MAX_PEERS_LISTED
    follow_poll_min_seconds: float = DEFAULT_FOLLOW_POLL_MIN_SECONDS
    follow_poll_max_seconds: float = DEFAULT_FOLLOW_POLL_MAX_SECONDS
    sharing_url_ttl_seconds: int = DEFAULT_SHARING_URL_TTL_SECONDS
    tokens_file: Path | None = None
    allow_anonymous: bool = False

    def check_parts(self) -> None:
        """Refuse a part size S3 would refuse, and a threshold above which single PUTs would fail."""
        if not MIN_PART_BYTES <= self.part_size <= MAX_PART_BYTES:
            raise ValueError(f"the part size must be {MIN_PART_BYTES}..{MAX_PART_BYTES} bytes (S3's limits)")
        if not 0 < self.multipart_threshold <= MAX_SINGLE_PUT_BYTES:
            raise ValueError(f"the multipart threshold must be 1..{MAX_SINGLE_PUT_BYTES} bytes (S3's largest PUT)")

    @property
    def sharing_url_ttl(self) -> int:
        """The Delta Sharing URL lifetime, capped by the stores' longest."""
        return min(self.sharing_url_ttl_seconds, MAX_URL_TTL_SECONDS)

    def check_exposure(self) -> None:
        """Refuse to serve anonymous access beyond this machine unless explicitly allowed."""
        if self.tokens_file is None and self.host not in LOOPBACK_HOSTS and not self.allow_anonymous:
            raise ValueError(
                f"refusing to serve {self.host} without --tokens: anyone who can reach it could read and write "
                "every dataset (give --tokens FILE, or --allow-anonymous if that is really what you want)"
            )

    def base_url(self, port: int) -> str:
        """The URL clients reach this server at (``--public-url`` or the bound address)."""
        if self.public_url:
            return self.public_url.rstrip("/")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{port}"

    def embedded_store(self, port: int) -> LocalStore | None:
        """The embedded store, when no S3 bucket is configured (its presigned URLs name this server)."""
        from smart_transfer.storage.local import LocalStore

        return None if self.s3_bucket is not None else LocalStore(self.root / "store", public_url=self.base_url(port))

    def open_store(self, port: int) -> ObjectStore:
        """The configured store: S3 when a bucket is given, else the embedded LocalStore."""
        embedded = self.embedded_store(port)
        if embedded is not None:
            return embedded
        from smart_transfer.storage.s3 import S3Store  # boto3 is slow to import: only when used

        assert self.s3_bucket is not None  # no embedded store means a bucket was given
        return S3Store(
            self.s3_bucket,
            self.s3_prefix,
            endpoint_url=self.s3_endpoint or os.environ.get("AWS_ENDPOINT_URL"),
            public_endpoint_url=self.s3_public_endpoint,
            region=self.s3_region,
            max_connections=self.s3_max_connections,
            connect_timeout=self.s3_connect_timeout,
            read_timeout=self.s3_read_timeout,
            attempts=self.s3_attempts,
            multipart_threshold=self.multipart_threshold,
            part_size=self.part_size,
        )

    def index_path(self, store: ObjectStore) -> Path:
        """The server's index lives on local disk, one per store so two buckets never share one."""
        if store.served_by_owner:
            return self.root / "index"
        identity = hashlib.sha256(store.describe().encode()).hexdigest()[:16]
        return self.root / f"index-{identity}"
