"""After each load-test level (scripts/loadtest.py): nothing partial is visible. Every dataset the level's
users pushed pulls whole into a fresh workspace (every object's hash checked) and verifies there with the
same head as the server's; where its pusher's last push succeeded, the pusher's workspace and the server
have the same head too. In-process through the SDK, a few datasets at a time (a CLI process per check would
spend most of its time starting Python)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from smart_transfer.client import Client
from smart_transfer.repo import Workspace

AT_ONCE = 4
TIMEOUT = 120.0


async def _same(workspace: Path, name: str, url: str, token: str, pull: bool) -> str | None:
    """None when ``workspace``'s ``name`` is whole and at the server's head, else what is wrong."""
    with Workspace(workspace) as opened:
        client = Client(opened, token=token)
        if pull:
            await client.pull(url)
        report = await client.verify(name, url)
    if not report.ok or report.relation != "same":
        return f"{report.relation}, problems {report.problems[:3]}"
    return None


async def _check(record: dict[str, Any], base: str, token: str, fresh: Path, gate: asyncio.Semaphore) -> str | None:
    name = record["dataset"]
    url = f"{base}/{name}"
    async with gate:
        try:
            async with asyncio.timeout(TIMEOUT):
                problem = await _same(fresh / name, name, url, token, pull=True)
                if problem is None and record["ok"]:
                    problem = await _same(Path(record["workspace"]), name, url, token, pull=False)
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
        ever_ok = record["ok"] or last.get(record["dataset"], {}).get("ever_ok", False)
        last[record["dataset"]] = {**record, "ever_ok": ever_ok}
    problems = asyncio.run(_check_all(list(last.values()), base, token, fresh))
    return {"datasets": len(last), "whole": len(last) - len(problems), "problems": problems}
