"""The shape rules of the codebase, measured on the tree itself: no function longer than 60 lines or of
cyclomatic complexity above 12 (as radon counts it: boolean operators too), and the layer order of
ARCHITECTURE.md (a package imports only packages below it; lazy imports inside functions and module paths
given to ``importlib`` count too)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from radon.complexity import add_inner_blocks, cc_visit
from radon.visitors import Function

PACKAGE = Path(__file__).resolve().parents[2] / "smart_transfer"
MAX_FUNCTION_LINES = 60
#: The house's one complexity cap (ruff's mccabe check is off: it folds nested functions into the outer one).
MAX_COMPLEXITY = 12

#: The packages of smart_transfer, bottom first: each may import only those before it in this list.
LAYERS = (
    "config",  # settings declared once; parsing of sizes and durations (pure)
    "model",  # blocks, events, multihash, encodings, pack and manifest formats (pure)
    "storage",  # ObjectStore, LocalStore, S3Store, URL signers
    "repo",  # a dataset repository on a store: refs, packs, index, commit, gc
    "protocol",  # sans-I/O messages, codec, transition tables, Connection
    "errors",  # the SDK's exceptions (raised by the readers and the client)
    "sync",  # pure decisions every path shares
    "transfer",  # the client's data plane
    "checkpoint",  # RocksDB checkpoint directory <-> manifest + files
    "reading",  # reading a local dataset back (no network)
    "ingest",  # the Spark job
    "client",  # the SDK: facades, flows, transports, inspection
    "peer",  # the peer's object server
    "server",  # the FastAPI app
    "cli",  # the smart-transfer command
)
_MODULE_PATH = re.compile(r"smart_transfer\.(\w+)(\.\w+)*")
#: Module-path strings count only when they name a package (``smart_transfer.access`` is a logger's name).
_PACKAGES = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").exists()}


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


def test_no_function_is_longer_than_60_lines() -> None:
    too_long = sorted(f"{name}: {lines} lines" for name, lines in _functions() if lines > MAX_FUNCTION_LINES)
    assert not too_long, "functions over 60 lines:\n" + "\n".join(too_long)


def _complexities() -> list[tuple[str, int]]:
    """(where, complexity) of every function, method and nested function, named like ``_functions``."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        for block in add_inner_blocks(cc_visit(path.read_text())):
            if isinstance(block, Function):
                name = f"{block.classname}.{block.name}" if block.classname else block.name
                found.append((f"{path.relative_to(PACKAGE)}:{block.lineno} {name}", block.complexity))
    return found


def test_no_function_has_a_cyclomatic_complexity_above_12() -> None:
    too_complex = sorted(
        f"{name}: complexity {complexity}" for name, complexity in _complexities() if complexity > MAX_COMPLEXITY
    )
    assert not too_complex, "functions of cyclomatic complexity over 12:\n" + "\n".join(too_complex)


def test_the_complexity_check_counts_boolean_operators() -> None:
    code = "def f(a, b, c):\n    return a and b or c\n"
    assert [block.complexity for block in cc_visit(code)] == [3]


def _imported(node: ast.AST) -> list[str]:
    """The smart_transfer packages one AST node refers to: import statements and module-path strings."""
    names: list[str] = []
    if isinstance(node, ast.ImportFrom) and node.module:
        names = [node.module]
        if node.module == "smart_transfer":
            names = [f"smart_transfer.{alias.name}" for alias in node.names]
    elif isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif (
        isinstance(node, ast.Constant) and isinstance(node.value, str) and (found := _MODULE_PATH.fullmatch(node.value))
    ):
        names = [node.value] if found.group(1) in _PACKAGES else []
    return [bits[1] for bits in (name.split(".") for name in names) if bits[0] == "smart_transfer" and len(bits) > 1]


def _edges() -> list[tuple[str, str, str]]:
    """(importing package, imported package, file) for every reference between two packages."""
    edges = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        source = parts[0] if len(parts) > 1 else path.stem
        for node in ast.walk(ast.parse(path.read_text())):
            edges += [
                (source, target, str(path.relative_to(PACKAGE))) for target in _imported(node) if target != source
            ]
    return edges


def test_every_package_has_its_place_in_the_layers() -> None:
    assert sorted(_PACKAGES - set(LAYERS)) == []
    assert sorted(set(LAYERS) - _PACKAGES) == []


def test_packages_import_only_the_packages_below_them() -> None:
    wrong = [
        f"{file}: {source} imports {target}, which is above it"
        for source, target, file in _edges()
        if source in LAYERS and (target not in LAYERS or LAYERS.index(target) > LAYERS.index(source))
    ]
    assert wrong == []


def test_the_layer_check_sees_lazy_imports_and_module_paths() -> None:
    code = "def f():\n    from smart_transfer.cli import main\nX = {'a': 'smart_transfer.server.app'}\n"
    found = [target for node in ast.walk(ast.parse(code)) for target in _imported(node)]
    assert sorted(found) == ["cli", "server"]
