"""Every server setting, declared once (flag, environment name, help, default, bounds): ``serve``'s parser,
``serve --help``, the environment, the README's table and the checks at start all come from here."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smart_transfer.config import SettingError, check_settings, setting
from smart_transfer.config.units import bucket, http_url, kms_key_id, region
from smart_transfer.config.units import size as parse_size
from smart_transfer.protocol import DEFAULT_OBJECTS_PER_PAGE, MAX_PEERS
from smart_transfer.server.adaptive import AdaptiveBounds
from smart_transfer.storage.base import DEFAULT_MAX_CONNECTIONS as DEFAULT_S3_MAX_CONNECTIONS
from smart_transfer.storage.base import DEFAULT_READBACK_BYTES, DEFAULT_URL_TTL_SECONDS, MAX_URL_TTL_SECONDS
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
MAX_PORT = 65535
#: Access and error log lines: text or json (one object per line).
LOG_FORMATS = ("text", "json")
#: How sessions and requests are admitted (--admission): the static caps, or an adaptive limit within them.
ADMISSION_MODES = ("adaptive", "static")
#: The common bounds of a wait in seconds, and of a count of things at once.
_SECONDS: dict[str, Any] = {"parse": float, "minimum": 0.001, "maximum": 86400, "unit": "seconds"}
_COUNT: dict[str, Any] = {"parse": int, "minimum": 1, "maximum": 1_000_000}
#: Every serve setting may also come from the environment: --max-sessions from $SMART_TRANSFER_MAX_SESSIONS.
ENV_PREFIX = "SMART_TRANSFER_"
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True)
class ServerSettings:
    """How the server stores data and what it allows: one declaration per setting (its ``serve`` flag,
    ``SMART_TRANSFER_*`` variable, help, default and bounds; see :mod:`smart_transfer.config`)."""

    host: str = setting(DEFAULT_HOST, "--host", "address to bind")
    port: int = setting(DEFAULT_PORT, "--port", "port to bind", parse=int, minimum=1, maximum=MAX_PORT)
    root: Path = setting(DEFAULT_ROOT, "--root", "directory of the embedded store and index", parse=Path)
    public_url: str | None = setting(
        None,
        "--public-url",
        "URL clients reach the server at (default: http://HOST:PORT)",
        metavar="URL",
        parse=http_url,
    )
    s3_endpoint: str | None = setting(
        None,
        "--s3-endpoint",
        "S3 endpoint URL (default: AWS, or $AWS_ENDPOINT_URL); credentials from the AWS environment",
        metavar="URL",
        parse=http_url,
    )
    s3_public_endpoint: str | None = setting(
        None,
        "--s3-public-endpoint",
        "S3 endpoint URL as clients reach it, for presigned URLs (default: --s3-endpoint)",
        metavar="URL",
        parse=http_url,
    )
    s3_bucket: str | None = setting(
        None,
        "--s3-bucket",
        "keep datasets in this S3 bucket instead of the embedded store",
        parse=bucket,
        metavar="BUCKET",
    )
    s3_prefix: str = setting("", "--s3-prefix", "key prefix inside the bucket", metavar="PREFIX")
    s3_region: str | None = setting(None, "--s3-region", "S3 region (default: the AWS environment's)", parse=region)
    s3_max_connections: int = setting(
        DEFAULT_S3_MAX_CONNECTIONS,
        "--s3-max-connections",
        "connections to S3 the server keeps open at most",
        parse=int,
        minimum=1,
        maximum=4096,
    )
    s3_connect_timeout: float = setting(
        DEFAULT_S3_CONNECT_TIMEOUT, "--s3-connect-timeout", "seconds to connect to S3", **_SECONDS
    )
    s3_read_timeout: float = setting(
        DEFAULT_S3_READ_TIMEOUT,
        "--s3-read-timeout",
        "seconds S3 may send nothing before a call's attempt fails",
        **_SECONDS,
    )
    s3_attempts: int = setting(
        DEFAULT_S3_ATTEMPTS,
        "--s3-attempts",
        "attempts of one S3 call (backoff between)",
        parse=int,
        minimum=1,
        maximum=20,
    )
    s3_sse: str | None = setting(
        None,
        "--s3-sse",
        "server-side encryption S3 applies to every write: the server's own and every presigned PUT, whose "
        "clients send it as a signed header (a bucket policy may deny writes without it)",
        choices=("AES256", "aws:kms"),
    )
    s3_sse_kms_key_id: str | None = setting(
        None,
        "--s3-sse-kms-key-id",
        "with --s3-sse aws:kms: the KMS key (id, alias/NAME or ARN; default: the account's S3 key)",
        metavar="KEY",
        parse=kms_key_id,
    )
    s3_checksum_sha256: bool = setting(
        False,
        "--s3-checksum-sha256",
        "bind each object's SHA-256 into its presigned PUT (x-amz-checksum-sha256): a store that checks it "
        "(AWS S3) refuses other bytes on arrival, and the commit trusts its checksum where the ETag is opaque",
        switch=True,
    )
    verify_read_limit: int = setting(
        DEFAULT_READBACK_BYTES,
        "--verify-read-limit",
        "bytes one push's commit may read back from the store to confirm objects neither an ETag (opaque "
        "under SSE-KMS) nor a checksum confirms; a push needing more is refused",
        parse=parse_size,
        minimum=1,
        maximum=MAX_OBJECT_BYTES,
        unit="bytes",
    )
    url_ttl_seconds: int = setting(
        DEFAULT_URL_TTL_SECONDS,
        "--url-ttl",
        "lifetime of presigned URLs (at most the stores' maximum, 7 days)",
        parse=int,
        minimum=1,
        maximum=MAX_URL_TTL_SECONDS,
        unit="seconds",
    )
    max_object_bytes: int = setting(
        MAX_OBJECT_BYTES,
        "--max-object-bytes",
        "largest object the server accepts, e.g. 10G (S3's largest is 5 TiB)",
        parse=parse_size,
        minimum=1,
        maximum=MAX_OBJECT_BYTES,
        unit="bytes",
    )
    multipart_threshold: int = setting(
        DEFAULT_MULTIPART_THRESHOLD,
        "--multipart-threshold",
        "objects larger than this are uploaded in parts (multipart: parallel, resumable part by part)",
        parse=parse_size,
        minimum=1,
        maximum=MAX_SINGLE_PUT_BYTES,
        unit="bytes",
    )
    part_size: int = setting(
        DEFAULT_PART_SIZE,
        "--part-size",
        "size of those parts (grown for objects that would need more than 1024 parts)",
        parse=parse_size,
        minimum=MIN_PART_BYTES,
        maximum=MAX_PART_BYTES,
        unit="bytes",
    )
    max_objects_per_page: int = setting(
        DEFAULT_OBJECTS_PER_PAGE, "--max-objects-per-page", "most objects one negotiation page may name", **_COUNT
    )
    max_message_bytes: int = setting(
        64 * 1024 * 1024,
        "--max-message-bytes",
        "largest WebSocket frame accepted (tarballs too)",
        parse=parse_size,
        minimum=64 * 1024,
        maximum=2**31,
        unit="bytes",
    )
    idle_timeout_seconds: float = setting(
        120.0, "--idle-timeout", "seconds a session may wait for the client's next message", **_SECONDS
    )
    session_timeout_seconds: float = setting(
        3600.0,
        "--session-timeout",
        "seconds a whole session may last (also bounds how long a push may hold uploads uncommitted)",
        parse=float,
        minimum=1,
        maximum=7 * 86400,
        unit="seconds",
    )
    keepalive_interval_seconds: float = setting(
        5.0,
        "--keepalive-interval",
        "seconds between the server's keep-alives: WebSocket pings, and Progress while it verifies a push",
        **_SECONDS,
    )
    max_sessions: int = setting(
        64, "--max-sessions", "concurrent pull/push sessions; more get 'busy, retry after'", **_COUNT
    )
    max_sessions_per_token: int = setting(
        8,
        "--max-sessions-per-token",
        "concurrent sessions of one token subject (anonymous: of one client address)",
        **_COUNT,
    )
    max_requests: int = setting(
        256, "--max-requests", "concurrent REST requests; more get HTTP 429 with Retry-After", **_COUNT
    )
    max_requests_per_token: int = setting(
        64,
        "--max-requests-per-token",
        "concurrent REST requests of one token (anonymous: of one client address)",
        **_COUNT,
    )
    busy_retry_after_seconds: int = setting(
        2,
        "--busy-retry-after",
        "the retry hint (seconds) sent with a busy answer (Busy, HTTP 429/503 Retry-After)",
        parse=int,
        minimum=1,
        maximum=3600,
        unit="seconds",
    )
    admission: str = setting(
        "adaptive",
        "--admission",
        "how many sessions and requests are admitted at once: static (the caps above) or adaptive (a limit "
        "within the caps that shrinks when operations take longer than usual, e.g. a saturated store)",
        choices=ADMISSION_MODES,
    )
    admission_min: int = setting(
        4, "--admission-min", "the adaptive limit never goes below this (nor above the caps)", **_COUNT
    )
    admission_initial: float = setting(
        1.0,
        "--admission-initial",
        "the adaptive limit starts at this fraction of each cap",
        parse=float,
        minimum=0.01,
        maximum=1.0,
    )
    admission_interval_seconds: float = setting(
        1.0,
        "--admission-interval",
        "seconds of finished operations the adaptive limit averages before it moves",
        parse=float,
        minimum=0.05,
        maximum=600,
        unit="seconds",
    )
    admission_smoothing: float = setting(
        0.2,
        "--admission-smoothing",
        "how far one interval moves the adaptive limit toward its target (1: all the way)",
        parse=float,
        minimum=0.01,
        maximum=1.0,
    )
    admission_tolerance: float = setting(
        4.0,
        "--admission-tolerance",
        "the server's recent store call latencies may reach this multiple of their usual (long-term) latency "
        "before the adaptive limit shrinks",
        parse=float,
        minimum=1.0,
        maximum=100.0,
    )
    admission_pace_tolerance: float = setting(
        8.0,
        "--admission-pace-tolerance",
        "sessions and requests may take this multiple of their usual duration (by kind, as when the server was "
        "not loaded) before their adaptive limit shrinks; wider than the store's, since an operation also lasts "
        "as long as its client takes; 0 turns this signal off (the limits then follow the store alone)",
        parse=float,
        minimum=0.0,
        maximum=1000.0,
    )
    admission_baseline_samples: int = setting(
        500,
        "--admission-baseline-samples",
        "store calls the usual latency of each kind (S3 operation) averages over (those within the tolerance, "
        "or any while the limit is at its minimum)",
        parse=int,
        minimum=10,
        maximum=1_000_000,
    )
    admission_delay_target_seconds: float = setting(
        0.5,
        "--admission-delay-target",
        "the adaptive limit drops when the server runs its work later than this on average (its event loop's "
        "lag, or its worker queue's wait): the server itself is overloaded; 0 turns this signal off",
        parse=float,
        minimum=0.0,
        maximum=60,
        unit="seconds",
    )
    admission_queue_wait_seconds: float = setting(
        0.2,
        "--admission-queue-wait",
        "a newcomer held back by the adaptive limit (not by a cap) waits this long for a freed slot before it "
        "gets 'busy, retry after' (the wait is part of its operation's time, so it is short); 0 refuses at once",
        parse=float,
        minimum=0.0,
        maximum=60,
        unit="seconds",
    )
    worker_threads: int = setting(
        32,
        "--worker-threads",
        "threads that run blocking work (store calls, the index); a slow store needs more of them busy waiting",
        parse=int,
        minimum=2,
        maximum=1024,
    )
    max_queue_wait_seconds: float = setting(
        2.0,
        "--max-queue-wait",
        "new sessions and requests get 'busy, retry after' while blocking work has waited this long for a thread",
        parse=float,
        minimum=0.01,
        maximum=3600,
        unit="seconds",
    )
    max_connections: int = setting(
        512,
        "--max-connections",
        "open connections (HTTP, idle keep-alive, WebSocket); more are answered 503 and closed",
        **_COUNT,
    )
    header_timeout_seconds: float = setting(
        10.0, "--header-timeout", "seconds a client may take to send a request's headers", **_SECONDS
    )
    keep_alive_seconds: float = setting(
        30.0, "--keep-alive-timeout", "seconds an idle kept-alive HTTP connection stays open", **_SECONDS
    )
    shutdown_grace_seconds: float = setting(
        30.0,
        "--shutdown-grace",
        "seconds running sessions may take to finish after SIGTERM before they end with ShuttingDown",
        parse=float,
        minimum=0,
        maximum=3600,
        unit="seconds",
    )
    ready_timeout_seconds: float = setting(
        2.0,
        "--ready-timeout",
        "seconds GET /readyz waits for the store and the index before it answers not ready",
        **_SECONDS,
    )
    forwarded_allow_ips: str = setting(
        "127.0.0.1",
        "--forwarded-allow-ips",
        "comma-separated addresses (or *) of balancers whose X-Forwarded-For names the client",
        metavar="IPS",
    )
    log_format: str = setting(
        "text",
        "--log-format",
        "access and error log lines on stderr: text, or one JSON object per line",
        choices=LOG_FORMATS,
    )
    error_log_rate: float = setting(
        20.0,
        "--error-log-rate",
        "error log lines per second at most (bursts of 10 s worth); the rest are counted, not written",
        parse=float,
        minimum=0.01,
        maximum=1e6,
    )
    peer_ttl_seconds: float = setting(
        600.0,
        "--peer-ttl",
        "seconds a peer announcement (pull --announce) stays listed; a following session renews its own",
        parse=float,
        minimum=1,
        maximum=7 * 86400,
        unit="seconds",
    )
    max_peers_listed: int = setting(
        8, "--max-peers-listed", "most live peers one pull plan lists", parse=int, minimum=1, maximum=MAX_PEERS
    )
    follow_poll_min_seconds: float = setting(
        0.5,
        "--follow-poll-min",
        "pull --follow: seconds between reads of a followed head in the store right after it moved",
        **_SECONDS,
    )
    follow_poll_max_seconds: float = setting(
        2.0,
        "--follow-poll-max",
        "pull --follow: longest interval between head reads (doubling while nothing changes); pushes "
        "through another replica reach followers within it, pushes through this one at once",
        **_SECONDS,
    )
    sharing_url_ttl_seconds: int = setting(
        3600,
        "--sharing-url-ttl",
        "lifetime of the URLs a Delta Sharing query answers with: its clients cannot ask for fresh ones "
        "mid-read, so they must outlive a whole read",
        parse=int,
        minimum=1,
        maximum=MAX_URL_TTL_SECONDS,
        unit="seconds",
    )
    tokens_file: Path | None = setting(
        None,
        "--tokens",
        "tokens file (see `token add`); without it access is anonymous, loopback only",
        parse=Path,
        metavar="FILE",
    )
    allow_anonymous: bool = setting(
        False,
        "--allow-anonymous",
        "serve without --tokens on a non-loopback address (anyone reaching it may write)",
        switch=True,
    )
    metrics_public: bool = setting(
        False,
        "--metrics-public",
        "answer GET /metrics without a token (by default, with --tokens, a scrape needs a known token)",
        switch=True,
    )

    def __post_init__(self) -> None:
        check_settings(self)
        if self.follow_poll_min_seconds > self.follow_poll_max_seconds:
            raise SettingError("--follow-poll-min must not exceed --follow-poll-max")
        self._check_s3()
        if 0 < self.admission_pace_tolerance < 1:
            raise SettingError("--admission-pace-tolerance must be 0 (off) or at least 1")

    def _check_s3(self) -> None:
        """The S3 settings that need one another."""
        if (self.s3_endpoint or self.s3_prefix or self.s3_public_endpoint) and not self.s3_bucket:
            raise SettingError("--s3-endpoint, --s3-public-endpoint and --s3-prefix need --s3-bucket")
        if (self.s3_sse or self.s3_sse_kms_key_id or self.s3_checksum_sha256) and not self.s3_bucket:
            raise SettingError("--s3-sse, --s3-sse-kms-key-id and --s3-checksum-sha256 need --s3-bucket")
        if self.s3_sse_kms_key_id is not None and self.s3_sse != "aws:kms":
            raise SettingError("--s3-sse-kms-key-id needs --s3-sse aws:kms")

    def adaptive_bounds(self, cap: int) -> AdaptiveBounds | None:
        """The adaptive limit's bounds under the static ``cap`` (None with ``--admission static``);
        ``--admission-min`` above a cap means the cap."""
        if self.admission != "adaptive":
            return None
        minimum = min(self.admission_min, cap)
        return AdaptiveBounds(
            minimum=minimum,
            maximum=cap,
            initial=max(minimum, round(cap * self.admission_initial)),
            interval=self.admission_interval_seconds,
            smoothing=self.admission_smoothing,
            tolerance=self.admission_tolerance,
            baseline_samples=self.admission_baseline_samples,
            delay_target=self.admission_delay_target_seconds,
        )

    def pace_bounds(self, cap: int) -> AdaptiveBounds | None:
        """The bounds of a limit's second adaptive limit, steered by its holders' own durations
        (None with ``--admission static`` or ``--admission-pace-tolerance 0``)."""
        bounds = self.adaptive_bounds(cap)
        if bounds is None or not self.admission_pace_tolerance:
            return None
        return replace(bounds, tolerance=self.admission_pace_tolerance, delay_target=0.0)

    @property
    def sharing_url_ttl(self) -> int:
        """The Delta Sharing URL lifetime (within the stores' longest, checked at start)."""
        return self.sharing_url_ttl_seconds

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
        # serve --help reads these settings without loading a store
        from smart_transfer.storage.local import LocalStore

        if self.s3_bucket is not None:
            return None
        return LocalStore(self.embedded_root, public_url=self.base_url(port))

    @property
    def embedded_root(self) -> Path:
        """Where the embedded store keeps its objects (created by the first server that uses it)."""
        return self.root / "store"

    def open_store(self, port: int) -> ObjectStore:
        """The configured store: S3 when a bucket is given, else the embedded LocalStore."""
        embedded = self.embedded_store(port)
        if embedded is not None:
            return embedded
        try:
            return self._s3_store()
        except ValueError as exc:  # botocore's own checks of an endpoint or a region it cannot use
            raise SettingError(f"cannot use these S3 settings: {exc}") from None

    def _s3_store(self) -> ObjectStore:
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
            sse=self.s3_sse,
            sse_kms_key_id=self.s3_sse_kms_key_id,
            checksum_sha256=self.s3_checksum_sha256,
        )

    def index_path(self, store: ObjectStore) -> Path:
        """The server's index lives on local disk, one per store so two buckets never share one."""
        if store.served_by_owner:
            return self.root / "index"
        identity = hashlib.sha256(store.describe().encode()).hexdigest()[:16]
        return self.root / f"index-{identity}"
