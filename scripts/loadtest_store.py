"""The store's side of a load-test level (scripts/loadtest.py): the local S3's processes (found by name and
by the instance's own ceph.conf in their command line, so another instance on the machine is never
counted), the gateway's own request counter (its admin socket's ``perf dump``: every S3 request it
served, the clients' presigned transfers included), and the servers' counters from their ``/metrics``:
their own store calls, by the session flow they served, sessions by flow, and the admission state."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psutil
from prometheus_client.parser import text_string_to_metric_families

#: Bound of one admin-socket query and of one metrics scrape, seconds.
PROBE_TIMEOUT = 10.0
#: The local S3's processes whose CPU the report shows.
STORE_PROCESSES = ("radosgw", "ceph-osd")


def store_pids(directory: Path) -> dict[str, int]:
    """Report name -> pid of the local S3 instance in ``directory`` (its gateway and its OSD)."""
    config = str(directory / "ceph.conf")
    found = {}
    for process in psutil.process_iter(["name", "cmdline"]):
        name, cmdline = process.info["name"], process.info["cmdline"] or []
        if name in STORE_PROCESSES and config in cmdline:
            found[f"store {name}"] = process.pid
    return found


def gateway_requests(directory: Path | None) -> dict[str, float]:
    """The gateway's counters of S3 requests (all, failed, GET, PUT) since it started; empty when the
    store is not a local instance or the socket does not answer."""
    if directory is None:
        return {}
    socket = directory / "run" / "client.rgw.a.asok"
    try:
        answer = subprocess.run(
            ["ceph", "--admin-daemon", str(socket), "perf", "dump"],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            check=True,
        )
        rgw = json.loads(answer.stdout)["rgw"]
    except (OSError, subprocess.SubprocessError, ValueError, KeyError):
        return {}
    return {key: float(rgw[key]) for key in ("req", "failed_req", "get", "put") if key in rgw}


def server_counters(urls: list[str], token: str) -> dict[str, float]:
    """The servers' counters summed over every replica: ``store calls``, ``store calls <origin>``,
    ``sessions <flow>``, ``refusals <limit>`` (adaptive), ``busy <limit>``, ``limit <limit>`` (now)."""
    totals: Counter[str] = Counter()
    for url in urls:
        text = httpx.get(f"{url}/metrics", headers={"authorization": f"Bearer {token}"}, timeout=PROBE_TIMEOUT).text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                key = _key(sample.name, sample.labels)
                if key is not None:
                    totals[key] += sample.value
    return dict(totals)


def _key(name: str, labels: dict[str, str]) -> str | None:
    keys = {
        "smart_transfer_store_seconds_count": "store calls",
        "smart_transfer_store_calls_total": f"store calls {labels.get('origin')}",
        "smart_transfer_sessions_total": f"sessions {labels.get('flow')}",
        "smart_transfer_admission_refusals_total": f"refusals {labels.get('limit')}",
        "smart_transfer_busy_answers_total": f"busy {labels.get('limit')}",
        "smart_transfer_admission_limit": f"limit {labels.get('limit')}",
    }
    return keys.get(name)


def store_side(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]], wall: float) -> dict[str, Any]:
    """What a level cost the store: the gateway's requests per second (all S3 requests it served), the
    servers' own store calls per second and per session of each flow, and the admission state."""
    gateway = {k: after["gateway"].get(k, 0.0) - v for k, v in before["gateway"].items()}
    servers = {k: v - before["servers"].get(k, 0.0) for k, v in after["servers"].items()}
    per_session = {}
    for flow in ("pull", "push"):
        sessions = servers.get(f"sessions {flow}", 0.0)
        if sessions:
            per_session[flow] = round(servers.get(f"store calls {flow}", 0.0) / sessions, 2)
    return {
        "gateway_requests_per_s": round(gateway["req"] / wall, 1) if "req" in gateway else None,
        "gateway_failed_per_s": round(gateway["failed_req"] / wall, 1) if "failed_req" in gateway else None,
        "server_store_calls_per_s": round(servers.get("store calls", 0.0) / wall, 1),
        "store_calls_per_session": per_session,
        "store_calls_other": servers.get("store calls other", 0.0),
        "adaptive_refusals": {k.split()[1]: v for k, v in servers.items() if k.startswith("refusals ")},
        "busy": {k.split()[1]: v for k, v in servers.items() if k.startswith("busy ") and v},
        "limit_end": {k.split()[1]: after["servers"][k] for k in after["servers"] if k.startswith("limit ")},
    }
