"""The documentation stays true: the generated reference pages equal what the code says, the site builds
with `mkdocs build --strict` (a broken link or a missing page fails), the README stays short, every
command a page shows exists with the flags it uses, and no page names internal work items."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.docs.blocks import code_blocks, shell_commands

sys.path.insert(0, str(ROOT / "scripts"))

import docs_reference

DOCS = ROOT / "docs"
README = ROOT / "README.md"
#: Pages with commands a reader types (the generated CLI reference is the parser itself).
PAGES = [README, *sorted(p for p in DOCS.rglob("*.md") if p != DOCS / "reference" / "cli.md")]
README_MAX_LINES = 200
#: Bound on one site build (about 20 s on the shared 2-core machine).
BUILD_SECONDS = 240


def test_the_generated_reference_pages_are_what_the_code_says() -> None:
    stale = [str(p.relative_to(ROOT)) for p in docs_reference.stale_pages()]
    assert not stale, f"{stale} differ from the code: run `make specs`"


def test_the_site_builds_strict_without_a_warning(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BUILD_SECONDS,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "WARNING" not in result.stderr, result.stderr[-4000:]
    for page in ("index.html", "tutorial/index.html", "reference/cli/index.html", "reference/sdk/index.html"):
        assert (tmp_path / "site" / page).exists(), page
    sdk = (tmp_path / "site" / "reference" / "sdk" / "index.html").read_text()
    assert "SyncClient" in sdk and "open_dataset" in sdk and "ingest" in sdk


def test_the_readme_is_short_and_links_to_pages_that_exist() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    for target in re.findall(r"\]\(((?:docs|bench-results)/[^)#]+)", text):
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_names_an_internal_work_item(page: Path) -> None:
    found = re.findall(r"\bissues?[ -]?#?\d+", page.read_text(), re.I)
    assert not found, f"{page.relative_to(ROOT)} names {found}"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _check_command(words: list[str], where: str) -> None:
    """``words`` (after `smart-transfer`) name a command, and each of its --flags is one of that command's."""
    from smart_transfer.cli.main import build_parser

    parser: argparse.ArgumentParser = build_parser()
    for word in words:
        sub = _subparsers(parser)
        if not sub:
            break
        assert word in sub, f"{where}: `smart-transfer {' '.join(words)}`: no command {word!r}"
        parser = sub[word]
    flags = {flag for action in parser._actions for flag in action.option_strings}
    for word in words:
        flag = word.split("=", 1)[0]
        if re.fullmatch(r"--?[a-z][a-z0-9-]*", flag):
            assert flag in flags, f"{where}: `smart-transfer {' '.join(words)}`: {flag} is not an option of it"


def _make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z0-9-]*):", (ROOT / "Makefile").read_text(), re.M))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_a_page_shows_exists(page: Path) -> None:
    targets = _make_targets()
    for block in code_blocks(page):
        if block.lang not in ("sh", "bash", ""):
            continue
        for command in shell_commands(block.body):
            for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", command):
                words = part.replace('"', " ").split()
                where = str(page.relative_to(ROOT))
                if words[:1] == ["smart-transfer"]:
                    _check_command([w for w in words[1:] if not w.startswith("$")], where)
                elif words[:1] == ["make"] and len(words) > 1 and "=" not in words[1]:
                    assert words[1] in targets, f"{where}: `make {words[1]}` is not a Makefile target"


def test_every_metric_is_described() -> None:
    from smart_transfer.server.metrics import Metrics

    page = (DOCS / "reference" / "operations.md").read_text()
    names = {metric.name for metric in Metrics().registry.collect()}
    assert names and not [n for n in names if n not in page]
