"""The server's Prometheus metrics (``GET /metrics``), one registry per app so two apps in one
process (tests) never share counters."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from smart_transfer.server.adaptive import AdaptiveLimit
    from smart_transfer.server.limits import ConcurrencyLimit

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]

#: Store call latency buckets, seconds: local S3 answers in milliseconds, a stalled one in its timeout.
STORE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

#: The flow of the session a store call is made for (set by the session's task; ``asyncio.to_thread`` carries
#: it into the worker thread that calls the store). Outside a session: REST, Delta Sharing, the web view and
#: housekeeping.
SESSION_FLOW: ContextVar[str] = ContextVar("smart_transfer_session_flow", default="other")

STORE_CALLS_HELP = (
    "The server's own store calls (every attempt), by the session flow they were made for "
    "(pull, push; other: REST, Delta Sharing, web view, housekeeping)"
)
FOOTER_READS_HELP = "Parquet footers Delta Sharing read for file statistics (once per slice, then kept in the index)"


class Metrics:
    """Every metric the server exports."""

    def __init__(self) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # *_created series only double the output
        self.registry = registry = CollectorRegistry()
        counter = functools.partial(Counter, registry=registry)  # most metrics are counters of this registry
        self.sessions = counter(
            "smart_transfer_sessions",
            "Sessions that ended, by flow and outcome (ok, or the error code the session ended with)",
            ["flow", "outcome"],
        )
        self.sessions_active = Gauge(
            "smart_transfer_sessions_active",
            "Sessions in progress (holding a session slot), by flow",
            ["flow"],
            registry=registry,
        )
        self.requests = counter(
            "smart_transfer_requests", "REST requests answered, by method and status", ["method", "status"]
        )
        self.session_bytes = counter(
            "smart_transfer_session_bytes", "Bytes of smart sessions' frames (all metadata)", ["flow", "direction"]
        )
        self.urls_signed = counter("smart_transfer_urls_signed", "Presigned URLs handed out, by method", ["method"])
        self.announcements = counter(
            "smart_transfer_peer_announcements", "Peer announcements recorded or renewed (pull --announce)"
        )
        self.follow_updates = counter(
            "smart_transfer_follow_updates",
            "Increments pulled by following sessions (pull --follow) after the head moved",
        )
        self.bytes_through_server = counter(
            "smart_transfer_object_bytes_through_server",
            "Object bytes this server read or wrote for clients (zero on the smart path over S3)",
        )
        self.preview_bytes = Counter(
            "smart_transfer_preview_bytes",
            "Data slice bytes the web view's preview read from the store (also in object_bytes_through_server)",
            registry=registry,
        )
        self.store_seconds = Histogram(
            "smart_transfer_store_seconds",
            "Duration of the server's own calls to its store (every attempt), by operation",
            ["operation"],
            buckets=STORE_BUCKETS,
            registry=registry,
        )
        self.store_errors = counter(
            "smart_transfer_store_errors",
            "Store calls that failed (timeouts, connection errors, error answers), by operation",
            ["operation"],
        )
        self.store_calls = counter("smart_transfer_store_calls", STORE_CALLS_HELP, ["origin"])
        self.sharing_footer_reads = counter("smart_transfer_sharing_footer_reads", FOOTER_READS_HELP)
        self.busy = counter(
            "smart_transfer_busy_answers", "Busy answers (Busy / HTTP 429 / 503), by what was at its limit", ["limit"]
        )
        self.connections_closed = counter(
            "smart_transfer_connections_closed",
            "Connections the server closed itself, by reason (header-timeout, too-many)",
            ["reason"],
        )

    def watch_workers(self, queued: Callable[[], float], oldest_wait: Callable[[], float]) -> None:
        """Gauges read at scrape time from the worker pool: the blocking calls waiting for a thread, and
        how long the oldest has waited (what ``--max-queue-wait`` compares)."""
        registry = self.registry
        waiting = Gauge("smart_transfer_worker_queue", "Blocking calls waiting for a worker thread", registry=registry)
        waiting.set_function(queued)
        oldest = Gauge(
            "smart_transfer_worker_queue_oldest_seconds",
            "Seconds the oldest blocking call in the queue has waited for a worker thread (0: none waits)",
            registry=registry,
        )
        oldest.set_function(oldest_wait)

    def watch_delay(self, delay: Callable[[], float]) -> None:
        """A gauge read at scrape time: how late the server runs its work (server/congestion.py)."""
        gauge = Gauge(
            "smart_transfer_server_delay_seconds",
            "How late the server runs its work: the event loop's lag or the worker queue's oldest wait, "
            "averaged over about a second (what --admission-delay-target compares)",
            registry=self.registry,
        )
        gauge.set_function(delay)

    def watch_admission(self, limit: ConcurrencyLimit) -> None:
        """Export the state of a session or request limit at scrape time (adaptive or static)."""
        self.registry.register(AdmissionCollector(limit))

    def store_call(self, operation: str, seconds: float, ok: bool) -> None:
        """A StoreObserver: one call to the store's backend."""
        self.store_seconds.labels(operation).observe(seconds)
        self.store_calls.labels(SESSION_FLOW.get()).inc()
        if not ok:
            self.store_errors.labels(operation).inc()

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)


class AdmissionCollector(Collector):
    """The ``smart_transfer_admission_*`` metrics of one concurrency limit, read when scraped."""

    def __init__(self, limit: ConcurrencyLimit) -> None:
        self.limit = limit

    def describe(self) -> list[Metric]:
        return []  # collected only when scraped; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        limit, label = self.limit, [self.limit.what]

        def gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(f"smart_transfer_admission_{name}", text, labels=["limit"])
            family.add_metric(label, value)
            return family

        yield gauge("limit", "Holders admitted at once now (the adaptive limit, or the static cap)", limit.limit)
        yield gauge("cap", "The static cap (--max-sessions / --max-requests)", limit.total)
        yield gauge("in_flight", "Holders admitted and not yet finished", limit.active)
        yield gauge("waiting", "Newcomers waiting for a slot (--admission-queue-wait)", limit.waiting)
        refusals = CounterMetricFamily(
            "smart_transfer_admission_refusals",
            "Busy answers because the adaptive limit stood below the cap",
            labels=["limit"],
        )
        refusals.add_metric(label, limit.adaptive_refusals)
        yield refusals
        adaptive = limit.adaptive
        if adaptive is None:
            return
        text = "The last interval's mean ratio of store call latencies to their usual (1: as usual)"
        yield gauge("latency_ratio", text, adaptive.last_ratio)
        yield gauge("recent_seconds", "The last interval's mean store call latency, seconds", adaptive.last_seconds)
        baseline = GaugeMetricFamily(
            "smart_transfer_admission_baseline_seconds",
            "The usual (long-term average) latency of the server's store calls, by S3 operation",
            labels=["limit", "kind"],
        )
        for kind, value in sorted(adaptive.baselines.items()):
            baseline.add_metric([limit.what, kind], value.seconds)
        yield baseline
        if limit.pace is not None:
            yield from self._pace(limit.pace, gauge)

    def _pace(self, pace: AdaptiveLimit, gauge: Callable[[str, str, float], GaugeMetricFamily]) -> Iterator[Metric]:
        """A limit's second adaptive limit, the one its holders' own durations steer."""
        yield gauge("pace_limit", "The limit the holders' own durations allow (the lower one applies)", pace.admits)
        text = "The last interval's mean ratio of the holders' durations to their usual (1: as usual)"
        yield gauge("pace_ratio", text, pace.last_ratio)
        baseline = GaugeMetricFamily(
            "smart_transfer_admission_pace_baseline_seconds",
            "The usual duration of a holder, by kind: a session's flow and decade of metadata bytes exchanged, "
            "a request's method and route",
            labels=["limit", "kind"],
        )
        for kind, value in sorted(pace.baselines.items()):
            baseline.add_metric([self.limit.what, kind], value.seconds)
        yield baseline
