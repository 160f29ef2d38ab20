"""MkDocs hooks (mkdocs.yml `hooks:`): publish the checked-in protocol documents and the web view's
picture with the site, from where they live in the repository, so the site links to the very files the
tests check (no copy to drift)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
#: site path -> repository file
PUBLISHED = {
    "specs/smart-transfer.asyncapi.yaml": ROOT / "asyncapi" / "smart-transfer.asyncapi.yaml",
    "specs/smart-transfer.openapi.yaml": ROOT / "openapi" / "smart-transfer.openapi.yaml",
    "specs/delta-sharing.openapi.yaml": ROOT / "openapi" / "delta-sharing.openapi.yaml",
    "assets/web-view.png": ROOT / "bench-results" / "ui" / "readme-dataset.png",
    "assets/web-view-compare.png": ROOT / "bench-results" / "ui" / "readme-compare.png",
    "assets/web-view-phone.png": ROOT / "bench-results" / "ui" / "readme-dataset-phone.png",
    "assets/loadtest.png": ROOT / "bench-results" / "loadtest" / "2026-11-27T123926Z.png",
    "assets/loadtest-admission.png": ROOT / "bench-results" / "loadtest" / "2026-11-29T060040Z.png",
    "assets/loadtest-overload.png": ROOT / "bench-results" / "loadtest" / "2026-11-29T090453Z.png",
    "assets/loadtest-paced.png": ROOT / "bench-results" / "loadtest" / "2026-11-29T123255Z.png",
}


def on_files(files: Files, config: Any, **_: Any) -> Files:
    """Add each published file to the site's files, so links to it are checked and it is copied."""
    for site_path, source in PUBLISHED.items():
        files.append(File.generated(config, site_path, abs_src_path=str(source)))
    return files
