"""The server page's values: version, store, health and readiness, the limits in force, and the
counters of ``/metrics`` as numbers a person reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import smart_transfer
from smart_transfer.server.ops_routes import readiness
from smart_transfer.server.state import ServerState

#: The metric families the page shows (the store latency histogram stays on /metrics).
SHOWN_METRICS = (
    "smart_transfer_sessions",
    "smart_transfer_sessions_active",
    "smart_transfer_requests",
    "smart_transfer_urls_signed",
    "smart_transfer_object_bytes_through_server",
    "smart_transfer_preview_bytes",
    "smart_transfer_peer_announcements",
    "smart_transfer_follow_updates",
    "smart_transfer_busy_answers",
    "smart_transfer_connections_closed",
    "smart_transfer_store_errors",
)


@dataclass(frozen=True)
class Counter:
    """One series: what it counts, its labels as text, its value."""

    name: str
    help: str
    labels: str
    value: int


def counters(state: ServerState) -> list[Counter]:
    """The shown metrics' series, in SHOWN_METRICS order (families with no series yet say 0)."""
    found: dict[str, list[Counter]] = {}
    for family in state.metrics.registry.collect():
        if family.name not in SHOWN_METRICS:
            continue
        series = found.setdefault(family.name, [])
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            labels = ", ".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            series.append(
                Counter(family.name.removeprefix("smart_transfer_"), family.documentation, labels, int(sample.value))
            )
    shown = []
    for name in SHOWN_METRICS:
        shown.extend(found.get(name) or [Counter(name.removeprefix("smart_transfer_"), "", "", 0)])
    return shown


#: The settings shown as the limits in force (``serve --help`` names the option and variable of each).
LIMIT_SETTINGS = (
    "max_sessions",
    "max_sessions_per_token",
    "max_requests",
    "max_requests_per_token",
    "max_connections",
    "max_object_bytes",
    "max_message_bytes",
    "max_objects_per_page",
    "url_ttl_seconds",
    "idle_timeout_seconds",
    "session_timeout_seconds",
    "header_timeout_seconds",
    "ready_timeout_seconds",
    "peer_ttl_seconds",
)


def limits(state: ServerState) -> list[tuple[str, Any]]:
    """The limits in force, by setting name."""
    return [(name, getattr(state.settings, name)) for name in LIMIT_SETTINGS]


async def server_values(state: ServerState) -> dict[str, Any]:
    """Everything the server page shows."""
    store = state.repository.store
    ready = await readiness(state)
    return {
        "server_version": smart_transfer.__version__,
        "store_kind": "embedded (local disk)" if store.served_by_owner else "S3",
        "ready": ready,
        "limits": limits(state),
        "counters": counters(state),
        "tokens": "a tokens file" if state.settings.tokens_file else "none: every visitor reads every dataset",
    }
