"""Boundaries that hold by structure (ARCHITECTURE.md, rule 12), measured on the tree itself: callers ask a
dataset, never its index; library code never changes process-wide state (the collector, the environment);
only the console script does."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "smart_transfer"
#: The package that owns the index: the repository is the boundary every other package asks.
REPOSITORY = PACKAGE / "repo"
#: The console script's package: the one place that sets a policy for the whole process.
CONSOLE = PACKAGE / "cli"
#: Calls that change the collector for the whole process.
COLLECTOR_POLICY = {"freeze", "unfreeze", "set_threshold"}
#: Calls that pause and resume it: allowed only in the one scope that puts back what it found.
COLLECTOR_SWITCHES = {"disable", "enable"}
PAUSING_SCOPE = "model/bulk.py"
#: Ways to change the process's environment.
ENVIRONMENT_WRITES = {"putenv", "unsetenv"}
ENVIRONMENT_METHODS = {"setdefault", "update", "pop", "clear", "popitem"}
#: The one function that sets environment variables (for a JVM's launch) and puts them back.
ENVIRONMENT_SCOPE = ("ingest/spark.py", "launch_environment")


def _tree(path: Path) -> ast.AST:
    return ast.parse(path.read_text(), str(path))


def _library_files(excluded: Path) -> list[Path]:
    return [path for path in sorted(PACKAGE.rglob("*.py")) if excluded not in path.parents]


def index_reaches(tree: ast.AST) -> list[int]:
    """Lines outside the repository that touch an index: a repository's private ``_index`` (read, passed
    or reached through), anything's ``.index.x``, or the index module itself imported."""
    found = []
    for node in ast.walk(tree):
        if (
            (
                isinstance(node, ast.Attribute)
                and (node.attr == "_index" or (isinstance(node.value, ast.Attribute) and node.value.attr == "index"))
            )
            or (
                isinstance(node, ast.ImportFrom)
                and (
                    node.module == "smart_transfer.repo.index"
                    or (node.module == "smart_transfer.repo" and any(alias.name == "index" for alias in node.names))
                )
            )
            or (isinstance(node, ast.Import) and any(alias.name == "smart_transfer.repo.index" for alias in node.names))
        ):
            found.append(node.lineno)
    return sorted(set(found))


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def _aliases(tree: ast.AST) -> list[str]:
    """Imports that would let process state change under another name (``from gc import freeze``,
    ``import gc as g``, ``from os import environ``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("gc", "os"):
            names = [alias.name for alias in node.names]
            if node.module == "gc" or {"environ", "putenv", "unsetenv"} & set(names):
                found.append(f"{node.lineno}: from {node.module} import {', '.join(names)}")
        elif isinstance(node, ast.Import) and any(a.name in ("gc", "os") and a.asname for a in node.names):
            found.append(f"{node.lineno}: import under another name")
    return found


def _environment_write(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        owner, name = ast.unparse(node.func.value), node.func.attr
        if (owner == "os" and name in ENVIRONMENT_WRITES) or (
            _is_environ(node.func.value) and name in ENVIRONMENT_METHODS
        ):
            return f"{ast.unparse(node.func)}()"
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign | ast.Delete):
        targets = list(node.targets)
    elif isinstance(node, ast.AugAssign):
        targets = [node.target]
    for target in targets:
        if _is_environ(target) or (isinstance(target, ast.Subscript) and _is_environ(target.value)):
            return f"{ast.unparse(target)} set"
    return None


def process_state_changes(
    tree: ast.AST, where: str = "", environment_scope: tuple[str, str] = ENVIRONMENT_SCOPE
) -> list[str]:
    """What ``tree`` (the module at ``where``) does to process-wide state: collector policy, pausing the
    collector outside the one pausing scope, and writes to the environment outside the one function that
    puts back what it sets."""
    found = _aliases(tree)
    scoped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and (where, node.name) == environment_scope:
            scoped.update(id(inner) for inner in ast.walk(node))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and ast.unparse(node.func.value) == "gc":
            name = node.func.attr
            if name in COLLECTOR_POLICY or (name in COLLECTOR_SWITCHES and where != PAUSING_SCOPE):
                found.append(f"{node.lineno}: gc.{name}()")
        change = _environment_write(node) if id(node) not in scoped else None
        if change is not None:
            found.append(f"{node.lineno}: {change}")
    return found


def test_no_code_outside_the_repository_reaches_into_its_index() -> None:
    files = _library_files(REPOSITORY)
    assert len(files) > 100
    offences = [f"{path.relative_to(PACKAGE)}:{line}" for path in files for line in index_reaches(_tree(path))]
    assert not offences, "ask the dataset (DatasetRepository), not its index:\n" + "\n".join(offences)


def test_the_index_scan_finds_a_reach_and_an_import() -> None:
    code = (
        "from smart_transfer.repo.index import RepositoryIndex\n"
        "size = dataset.index.object_size(name, kind, h)\n"
        "position = text.index(':')\n"
        "value = item.index\n"
        "kept = dataset._index\n"
        "use(repository._index)\n"
        "import smart_transfer.repo.index\n"
        "from smart_transfer.repo import index\n"
    )
    assert index_reaches(ast.parse(code)) == [1, 2, 5, 6, 7, 8]


def test_library_code_leaves_the_collector_and_the_environment_alone() -> None:
    files = _library_files(CONSOLE)
    offences = [
        f"{path.relative_to(PACKAGE)}:{change}"
        for path in files
        for change in process_state_changes(_tree(path), str(path.relative_to(PACKAGE)))
    ]
    assert not offences, "only the console script (cli/) sets process-wide policy:\n" + "\n".join(offences)


def test_the_process_state_scan_finds_each_kind_of_change() -> None:
    code = (
        "gc.freeze()\ngc.unfreeze()\ngc.disable()\n"
        "os.environ['A'] = '1'\nos.environ.setdefault('B', '2')\nos.putenv('C', '3')\n"
        "def scope():\n    os.environ.update(x)\n"
        "from gc import freeze\nimport gc as g\nfrom os import environ\nos.environ |= {}\n"
    )
    assert sorted(process_state_changes(ast.parse(code), "x.py", ("x.py", "scope"))) == [
        "10: import under another name",
        "11: from os import environ",
        "12: os.environ set",
        "1: gc.freeze()",
        "2: gc.unfreeze()",
        "3: gc.disable()",
        "4: os.environ['A'] set",
        "5: os.environ.setdefault()",
        "6: os.putenv()",
        "9: from gc import freeze",
    ]
    assert process_state_changes(ast.parse("gc.disable()\ngc.enable()\n"), PAUSING_SCOPE) == []
    assert "8: os.environ.update()" in process_state_changes(ast.parse(code), "y.py", ("x.py", "scope"))


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports() -> dict[str, set[str]]:
    """Every module of the package and the modules of the package it imports (at the top or inside a
    function: a lazy import is an arrow too); a package's own ``__init__`` is not counted for its
    submodules."""
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    arrows: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(_tree(path)):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            arrows[name] |= {t for t in targets if t in modules and t != name and not name.startswith(t + ".")}
    return arrows


def circles(arrows: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``arrows``: strongly connected sets of more than one module (Tarjan)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in arrows[module]:
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            members = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(members) > 1:
                found.append(sorted(members))

    for module in sorted(arrows):
        if module not in order:
            visit(module)
    return found


def test_no_modules_import_each_other_in_a_circle() -> None:
    arrows = module_imports()
    assert len(arrows) > 200 and sum(map(len, arrows.values())) > 800
    assert circles(arrows) == []


def test_the_circle_check_finds_a_circle_through_a_lazy_import() -> None:
    arrows = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(arrows) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
