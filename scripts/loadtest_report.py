"""The load test's outputs (scripts/loadtest.py): bench-results/loadtest/<date>.json (everything),
<date>.md (tables) and <date>.png (throughput and p99 against clients, one line per configuration)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: p99 above this (ms) is past the knee.
KNEE_MS = 1000.0
#: Issue 47's Done criteria: goodput at the top level at least this share of the best level's, and p99 of
#: the admitted operations under ADMITTED_P99_MS at every level.
GOODPUT_SHARE = 0.8
ADMITTED_P99_MS = 2000.0


def totals(result: dict[str, Any]) -> dict[str, float | None]:
    """Sessions/s (SDK pulls and pushes), requests/s (REST and Delta Sharing), goodput (operations of every
    kind that succeeded, per second: Locust's rate of each kind times its share of successes; an operation
    the SDK retried after Busy and then finished counts once, as a success) and the overall p99."""
    kinds = result["kinds"]
    sessions = sum(k["per_s"] for name, k in kinds.items() if k["type"] == "SDK")
    requests = sum(k["per_s"] for name, k in kinds.items() if k["type"] in ("GET", "POST"))
    goodput = sum(
        k["per_s"] * (k["count"] - k["failures"]) / k["count"]
        for name, k in kinds.items()
        if name != "Aggregated" and k["count"]
    )
    aggregated = kinds.get("Aggregated", {})
    admitted = result.get("admitted", {}).get("Aggregated", {})
    return {
        "sessions_per_s": round(sessions, 2),
        "requests_per_s": round(requests, 2),
        "goodput_per_s": round(goodput, 2),
        "p99_ms": aggregated.get("99"),
        "admitted_p99_ms": admitted.get("99"),
        "refused": admitted.get("refused"),
    }


def store_cells(result: dict[str, Any]) -> list[str]:
    """The store's side of a level for the summary: its gateway's CPU, S3 requests/s (the gateway's own
    count), the servers' store calls/s, and their store calls per pull and per push session."""
    store = result.get("store") or {}
    gateway = result["servers"].get("store radosgw", {})
    per_session = store.get("store_calls_per_session", {})
    return [
        str(gateway.get("cpu_mean_pct", "-")),
        str(store.get("gateway_requests_per_s") or "-"),
        str(store.get("server_store_calls_per_s", "-")),
        "/".join(str(per_session.get(flow, "-")) for flow in ("pull", "push")),
    ]


def knee(results: list[dict[str, Any]]) -> str:
    """The first level whose overall p99 passes KNEE_MS."""
    for result in sorted(results, key=lambda r: r["clients"]):
        p99 = totals(result)["p99_ms"]
        if p99 is not None and p99 > KNEE_MS:
            return f"{result['clients']} clients (p99 {p99 / 1000:.1f} s)"
    return f"not reached up to {max(r['clients'] for r in results)} clients"


def by_config(run: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for result in run["results"]:
        grouped.setdefault(result["config"], []).append(result)
    return grouped


def _level_rows(result: dict[str, Any]) -> list[str]:
    """Per kind: Locust's count, failures, rate and end-to-end percentiles, then the refusals and the
    admitted operations' count and percentiles ("-" where the run has none: a run from before they were
    measured, or a kind with no admitted operation)."""
    rows = []
    admitted = result.get("admitted", {})
    for name, kind in sorted(result["kinds"].items()):
        mine = admitted.get(name, {})
        cells = [name, kind["count"], kind["failures"], mine.get("refused", "-"), kind["per_s"]]
        cells += [_s(kind[p]) for p in ("50", "95", "99")]
        cells += [mine.get("count", "-"), *(_s(mine.get(p)) for p in ("50", "95", "99"))]
        rows.append("| " + " | ".join(str(c) for c in cells) + " |")
    return rows


def _s(ms: float | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.2f}"


def level_section(result: dict[str, Any]) -> list[str]:
    t = totals(result)
    undocumented = result["undocumented"]
    verdict = "yes" if not undocumented and result["servers_alive"] else f"**no**: {undocumented}"
    verify = result["verify"]
    lines = [
        f"#### {result['config']}: {result['clients']} clients",
        "",
        f"{t['sessions_per_s']} sessions/s, {t['requests_per_s']} requests/s, goodput {t['goodput_per_s']} "
        "operations/s; every refusal the documented "
        f"429 + Retry-After / Busy: {verdict}; pushed datasets whole on the server: "
        f"{verify['whole']} of {verify['datasets']}" + (f" ({verify['problems'][:3]})" if verify["problems"] else ""),
        "",
        "| kind | count | failures | refused (Busy / 429) | per s | p50 s | p95 s | p99 s "
        "| admitted | admitted p50 s | admitted p95 s | admitted p99 s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *_level_rows(result),
        "",
    ]
    if result["errors"]:
        lines += ["| kind | error | count |", "|---|---|---:|"]
        lines += [f"| {e['kind']} | {e['error'][:120]} | {e['count']} |" for e in result["errors"]]
        lines.append("")
    lines += [
        "| process | CPU mean, % of a core | CPU max, % | RSS peak MiB | RSS end MiB |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, s in result["servers"].items():
        lines.append(
            f"| {name} | {s['cpu_mean_pct']} | {s['cpu_max_pct']} | {s['rss_peak_mib']} | {s['rss_end_mib']} |"
        )
    lines += ["", f"Outcomes: `{json.dumps(result['outcomes'], sort_keys=True)}`", ""]
    if result.get("store"):
        lines += [f"Store side and admission: `{json.dumps(result['store'], sort_keys=True)}`", ""]
    return lines


def summary_table(run: dict[str, Any]) -> list[str]:
    lines = [
        "| configuration | clients | sessions/s | requests/s | goodput ops/s | p99 s (all kinds) "
        "| p99 s admitted | refused | errors | refusals documented | whole | store CPU % | store req/s "
        "| server store calls/s | calls per pull/push |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---|",
    ]
    for result in run["results"]:
        t = totals(result)
        errors = sum(e["count"] for e in result["errors"])
        documented = "yes" if not result["undocumented"] and result["servers_alive"] else "**no**"
        verify = result["verify"]
        lines.append(
            f"| {result['config']} | {result['clients']} | {t['sessions_per_s']} | {t['requests_per_s']} | "
            f"{t['goodput_per_s']} | {_s(t['p99_ms'])} | {_s(t['admitted_p99_ms'])} | {_or_dash(t['refused'])} | "
            f"{errors} | {documented} | "
            f"{verify['whole']}/{verify['datasets']} | " + " | ".join(store_cells(result)) + " |"
        )
    return lines


def _or_dash(value: Any) -> str:
    return "-" if value is None else str(value)


def _verdict(passed: bool) -> str:
    return "PASS" if passed else "**FAIL**"


def done_criteria(results: list[dict[str, Any]]) -> list[str]:
    """Issue 47's Done criteria for one configuration's levels, one line each with its figures: goodput at
    the top level against the best level's, the worst level's p99 of admitted operations, refusals only
    the documented ones (and every server alive), every pushed dataset whole."""
    ordered = sorted(results, key=lambda r: r["clients"])
    goodputs = [(r["clients"], totals(r)["goodput_per_s"] or 0.0) for r in ordered]
    best_clients, best = max(goodputs, key=lambda g: g[1])
    top_clients, top = goodputs[-1]
    share = top / best if best else 0.0
    p99s = [(r["clients"], totals(r)["admitted_p99_ms"]) for r in ordered]
    measured = [ms for _, ms in p99s if ms is not None]
    worst = max(measured) if measured else None
    each = ", ".join(f"{_s(ms)} at {clients}" for clients, ms in p99s)
    sdk = sum(k["refused"] for r in ordered for k in _admitted_kinds(r) if k["type"] == "SDK")
    http = sum(k["refused"] for r in ordered for k in _admitted_kinds(r) if k["type"] != "SDK")
    undocumented: dict[str, int] = {}
    for result in ordered:
        for name, count in result["undocumented"].items():
            undocumented[name] = undocumented.get(name, 0) + count
    alive = all(r["servers_alive"] for r in ordered)
    whole = sum(r["verify"]["whole"] for r in ordered)
    datasets = sum(r["verify"]["datasets"] for r in ordered)
    problems = [p for r in ordered for p in r["verify"]["problems"]]
    others = ", ".join(f"{n} {c}" for n, c in sorted(undocumented.items())) or "none"
    return [
        f"- Goodput at the top level ({top_clients} clients) {top} ops/s, the best level's ({best_clients} "
        f"clients) {best}: {share:.0%} (at least {GOODPUT_SHARE:.0%}): {_verdict(share >= GOODPUT_SHARE)}",
        f"- p99 of admitted operations, s: {each}; max {_s(worst)} (under {ADMITTED_P99_MS / 1000:.0f} s at every "
        f"level): {_verdict(worst is not None and worst < ADMITTED_P99_MS)}",
        f"- Refusals only the documented ones: {sdk} Busy, {http} HTTP 429/503 with Retry-After; anything "
        f"else: {others}; servers alive: {'yes' if alive else 'no'}: {_verdict(not undocumented and alive)}",
        f"- Every pushed dataset whole: {whole} of {datasets}"
        + (f" ({problems[:3]})" if problems else "")
        + f": {_verdict(whole == datasets and not problems)}",
    ]


def _admitted_kinds(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [kind for name, kind in result.get("admitted", {}).items() if name != "Aggregated"]


def criteria_section(run: dict[str, Any]) -> list[str]:
    """The Done criteria per configuration, and what they were meant for when this run is not that."""
    lines = ["### Overload goals", ""]
    if run["quick"] or 200 not in run["levels"]:
        lines += [
            f"The criteria are meant for 50, 100 and 200 clients (400 if the machine allows) on a quiet machine; "
            f"this run's levels are {run['levels']} (load {run['machine']['load_1m']} at the end), so these lines "
            "show the figures, not the verdict.",
            "",
        ]
    for config, results in by_config(run).items():
        lines += [f"{config}:", "", *done_criteria(results), ""]
    return lines


def markdown(run: dict[str, Any], png: str) -> str:
    head = [f"# Load test, {run['date']}", ""]
    if run["note"]:
        head += [f"**{run['note']}**", ""]
    head += [
        f"Levels {run['levels']} concurrent clients, {run['duration_s']:.0f} s each (after all started); user mix "
        f"(Locust weights) {run['weights']}, think time {run['wait_s']} s; {run['agents']} SDK agent processes; "
        f"{run['machine']['cpus']} CPUs, load {run['machine']['load_1m']} at the end; "
        f"whole run {run['total_s']:.0f} s."
        + (f" Servers started with `{run['serve_args']}`." if run.get("serve_args") else " Server limits: defaults."),
        "",
        "The load generator (Locust and its SDK agent processes) runs on the same machine as the servers: its CPU is "
        "in each level's table. Latencies end to end are Locust's (SDK operations: timed inside the agent around the "
        "SDK call, Busy waits included); p99 (all kinds) is Locust's aggregate over every kind. Admitted: the "
        "operations the servers admitted, timed from the start of the admitted attempt (the SDK's first attempt after"
        " its last Busy answer; a REST request that got an answer other than 429/503 with Retry-After) to the end, "
        "whether they then succeeded or failed; p99 s admitted is over every kind; the admitted count can exceed "
        "Locust's by the operations that ended after Locust last rewrote its CSV (once a second). Refused: attempts "
        "refused with Busy or 429/503 + Retry-After (an SDK operation may be refused several times before it is "
        "admitted). Goodput: operations that succeeded per second. Store side (local S3 only): store CPU is the "
        "gateway's (radosgw) mean, % of a core (its OSD's is in each level's table); store req/s is every S3 request "
        "the gateway served (its own counter: the clients' presigned transfers and the servers' calls), per second of"
        " the level's wall time; server store calls/s and calls per pull/push session are the servers' own calls from"
        " their /metrics.",
        "",
        *summary_table(run),
        "",
        "Knee (overall p99 above 1 s):",
        "",
        *[f"- {config}: {knee(results)}" for config, results in by_config(run).items()],
        "",
        *criteria_section(run),
        f"![throughput and p99 against clients]({png})",
        "",
        "### Per level",
        "",
    ]
    for result in run["results"]:
        head += level_section(result)
    return "\n".join(head) + "\n"


def chart(run: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (throughput, latency) = plt.subplots(1, 2, figsize=(11, 4.2))
    for config, unsorted in by_config(run).items():
        results = sorted(unsorted, key=lambda r: r["clients"])
        clients = [r["clients"] for r in results]
        rates = [totals(r)["sessions_per_s"] + totals(r)["requests_per_s"] for r in results]  # type: ignore[operator]
        line = throughput.plot(clients, rates, marker="o", label=config)[0]
        goodput = [totals(r)["goodput_per_s"] for r in results]
        label = f"{config}: goodput"
        throughput.plot(clients, goodput, marker="x", linestyle="--", color=line.get_color(), label=label)
        line = latency.plot(clients, [(totals(r)["p99_ms"] or 0) / 1000 for r in results], marker="o", label=config)[0]
        admitted = [(totals(r)["admitted_p99_ms"] or 0) / 1000 for r in results]
        label = f"{config}: admitted"
        latency.plot(clients, admitted, marker="x", linestyle="--", color=line.get_color(), label=label)
    throughput.set(xlabel="concurrent clients", ylabel="sessions + requests per s", title="throughput")
    latency.set(xlabel="concurrent clients", ylabel="p99, s (all kinds)", title="p99 latency: end to end, admitted")
    latency.axhline(KNEE_MS / 1000, color="grey", linestyle=":", linewidth=1)
    latency.axhline(ADMITTED_P99_MS / 1000, color="red", linestyle=":", linewidth=1)
    for axes in (throughput, latency):
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    if run["note"]:
        figure.suptitle(run["note"], fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_outputs(run: dict[str, Any], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    stem = run["date"].replace(":", "").replace("+0000", "Z")
    paths = [directory / f"{stem}.json", directory / f"{stem}.md", directory / f"{stem}.png"]
    paths[0].write_text(json.dumps(run, indent=1) + "\n")
    chart(run, paths[2])
    paths[1].write_text(markdown(run, paths[2].name))
    return paths
