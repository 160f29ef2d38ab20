"""After each load-test level (scripts/loadtest.py): nothing partial is visible. Every dataset the level's
users pushed pulls whole into a fresh workspace (every object's hash checked), verifies there with the
same head as the server's, and holds the last head a push was acknowledged with; the pusher's own
workspace is at the server's head or ahead of it (never behind or apart). In-process through the SDK, a
few datasets at a time (a CLI process per check would spend most of its time starting Python)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from smart_transfer.client import Client
from smart_transfer.repo import Workspace

AT_ONCE = 4
TIMEOUT = 120.0


async def _same(workspace: Path, name: str, url: str, token: str, pull: bool, acknowledged: str | None) -> str | None:
    """None when ``workspace``'s ``name`` is whole and relates to the server's as it should, else what is
    wrong. A fresh pull must be at the server's head, and that chain must hold the ``acknowledged`` head
    (the last push the server confirmed). A pusher's own workspace is at the server's head, or ahead of
    it when the run ended inside its last push (its blocks added, the push cut): never behind or apart."""
    from smart_transfer.model.multihash import Multihash

    with Workspace(workspace) as opened:
        client = Client(opened, token=token)
        if pull:
            await client.pull(url)
        report = await client.verify(name, url)
        held = acknowledged is None or opened.dataset(name).on_chain(Multihash.parse(acknowledged))
        missing = pull and not held
    allowed = ("same",) if pull else ("same", "local-ahead")
    if not report.ok or report.relation not in allowed or missing:
        lost = ", the acknowledged head is not on the server's chain" if missing else ""
        return f"{report.relation}, problems {report.problems[:3]}{lost}"
    return None


async def _check(record: dict[str, Any], base: str, token: str, fresh: Path, gate: asyncio.Semaphore) -> str | None:
    name = record["dataset"]
    url = f"{base}/{name}"
    async with gate:
        try:
            async with asyncio.timeout(TIMEOUT):
                problem = await _same(fresh / name, name, url, token, True, record["acknowledged"])
                if problem is None and record["ever_ok"]:
                    problem = await _same(Path(record["workspace"]), name, url, token, False, None)
                    problem = problem and f"pusher's workspace: {problem}"
        except Exception as exc:  # every failure is a finding to report, but a dataset no push created
            problem = (
                None if not record["ever_ok"] and "DatasetNotFound" in str(exc) else f"{type(exc).__name__}: {exc}"
            )
    return None if problem is None else f"{name}: {problem}"[:400]


async def _check_all(records: list[dict[str, Any]], base: str, token: str, fresh: Path) -> list[str]:
    gate = asyncio.Semaphore(AT_ONCE)
    found = await asyncio.gather(*(_check(record, base, token, fresh, gate) for record in records))
    return [problem for problem in found if problem]


def verify_pushes(pushes: Path, base: str, token: str, fresh: Path) -> dict[str, Any]:
    """Check the datasets named in ``pushes`` (one JSON line per push: dataset, workspace, ok; the last
    line of a dataset says how its last push ended) on the server at ``base``."""
    last: dict[str, dict[str, Any]] = {}
    for line in pushes.read_text().splitlines() if pushes.exists() else []:
        record = json.loads(line)
        before = last.get(record["dataset"], {})
        acknowledged = record["head"] if record["ok"] else before.get("acknowledged")
        last[record["dataset"]] = {**record, "ever_ok": acknowledged is not None, "acknowledged": acknowledged}
    problems = asyncio.run(_check_all(list(last.values()), base, token, fresh))
    return {"datasets": len(last), "whole": len(last) - len(problems), "problems": problems}
