"""The shape rules of the codebase, measured on the tree itself: no function longer than 80 lines,
and no import cycle between the packages of ``smart_transfer`` (dependencies point one way)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "smart_transfer"
MAX_FUNCTION_LINES = 80


def _functions() -> list[tuple[str, int]]:
    found = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                found.append(
                    (f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}", node.end_lineno - node.lineno + 1)
                )
    return found


def test_no_function_is_longer_than_80_lines() -> None:
    too_long = sorted((lines, name) for name, lines in _functions() if lines > MAX_FUNCTION_LINES)
    assert too_long == []


def _package_imports() -> dict[str, set[str]]:
    """Which top-level packages of smart_transfer each one imports (at module level or inside functions)."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).parts
        if len(parts) < 2:
            continue
        source = parts[0]
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                bits = name.split(".")
                if bits[0] == "smart_transfer" and len(bits) > 1 and bits[1] != source:
                    graph.setdefault(source, set()).add(bits[1])
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> list[str] | None:
        state[node] = 1
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*trail, node, target]
            if target not in state and (found := visit(target, [*trail, node])):
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [])):
            return found
    return None


def test_packages_import_each_other_in_one_direction_only() -> None:
    assert _cycle(_package_imports()) is None


@pytest.mark.parametrize("package", ["server", "client"])
def test_the_top_packages_are_not_imported_from_below(package: str) -> None:
    graph = _package_imports()
    below = [source for source, targets in graph.items() if package in targets and source not in ("server", "client")]
    assert below == []
