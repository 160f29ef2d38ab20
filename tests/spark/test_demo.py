"""`make demo` keeps working: the whole story end to end, as the README shows it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import ROOT


def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "demo.sh"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any("ingest: 5000 of 5000 row(s) added" in line for line in lines)
    assert any("ingest: 70 of 70 row(s) added" in line for line in lines)
    pushes = [line for line in lines if line.strip().startswith("push:")]
    assert len(pushes) == 2 and " 0 skipped" in pushes[0] and " 0 skipped" not in pushes[1]
    assert "A and B: identical heads and blocks" in result.stdout
