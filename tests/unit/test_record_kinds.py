"""One rule per record kind (docs/explanation/design.md, "Which kind a record is"), measured on the tree:
every class declared as a record is of the kind its purpose calls for.

- wire messages and their error details (``protocol/messages.py``, ``protocol/errors.py``): msgspec Structs;
- HTTP bodies (the REST, ops and Delta Sharing routes, the tokens file): pydantic models, only in
  ``protocol/rest.py`` (shared by the server and the SDK) and ``server/``;
- settings (a class with declared ``setting()`` fields) and the values ``--help`` derives from them:
  dataclasses;
- store records (``storage/``): NamedTuples;
- records of the client's pull and push path (``model/``, ``sync/``, ``transfer/``, ``checkpoint/``,
  ``client/flows/``, ``client/transports/``, ``client/remote.py``, ``protocol/``, the packs every commit
  writes): msgspec Structs;
- every other record (the server, the repository, ingest, reading, the peer, inspection commands):
  dataclasses.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "smart_transfer"

WIRE = ("protocol/messages.py", "protocol/errors.py")
HTTP_MODELS = ("protocol/rest.py", "server/")
STORE = ("storage/",)
PULL_AND_PUSH_PATH = (
    "model/",
    "sync/",
    "transfer/",
    "checkpoint/",
    "client/flows/",
    "client/transports/",
    "client/remote.py",
    "protocol/",
    "repo/packs.py",
)
#: Settings and what ``--help`` derives from them: read before msgspec may load.
SETTINGS = {"config/__init__.py:Declared", "transfer/limits.py:Timeouts", "transfer/limits.py:LargeObjects"}
#: Records whose kind differs from their place's, each with why.
JUSTIFIED = {
    "model/multihash.py:Multihash": "caches its text in a field that takes no part in comparisons (dataclass)",
    "model/block.py:MetadataBlock": "caches its canonical bytes in a field that takes no part in comparisons",
}


def kind_of(node: ast.ClassDef) -> str | None:
    """The record kind a class is declared as (None: not a record)."""
    bases = [ast.unparse(base) for base in node.bases]
    if any("dataclass" in ast.unparse(decorator) for decorator in node.decorator_list):
        return "dataclass"
    if any(base == "Struct" or base.endswith(".Struct") for base in bases):
        return "struct"
    if "NamedTuple" in bases:
        return "namedtuple"
    if any(base.endswith("BaseModel") for base in bases):
        return "pydantic"
    return None


def _declares_settings(node: ast.ClassDef) -> bool:
    return any(
        isinstance(item, ast.AnnAssign)
        and isinstance(item.value, ast.Call)
        and ast.unparse(item.value.func).endswith("setting")
        for item in node.body
    )


def expected_kind(where: str, node: ast.ClassDef, found: str) -> str:
    """The kind the rule asks of class ``node`` declared at ``where`` (``path:Name``)."""
    path = where.split(":", maxsplit=1)[0]
    if where in JUSTIFIED:
        return found
    if where in SETTINGS or _declares_settings(node):
        return "dataclass"
    if path.startswith(WIRE):
        return "struct"
    if found == "pydantic" and path.startswith(HTTP_MODELS):
        return "pydantic"
    if path.startswith(STORE):
        return "namedtuple"
    if path.startswith(PULL_AND_PUSH_PATH):
        return "struct"
    return "dataclass"


def records() -> list[tuple[str, ast.ClassDef, str]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and (kind := kind_of(node)) is not None:
                found.append((f"{path.relative_to(PACKAGE)}:{node.name}", node, kind))
    return found


def test_every_record_is_of_the_kind_its_purpose_calls_for() -> None:
    found = records()
    assert len(found) > 100
    wrong = [
        f"{where}: a {kind}, the rule asks for a {expected_kind(where, node, kind)}"
        for where, node, kind in found
        if kind != expected_kind(where, node, kind)
    ]
    assert wrong == [], "\n".join(wrong)


def test_every_justified_exception_names_a_record() -> None:
    assert set(JUSTIFIED) <= {where for where, _, _ in records()}


def test_the_rule_tells_each_kind_apart() -> None:
    code = (
        "@dataclass(frozen=True)\nclass A:\n    x: int = setting(1, '--x', 'help')\n"
        "class B(Struct, frozen=True):\n    y: int\n"
        "class C(NamedTuple):\n    z: int\n"
        "class D(BaseModel):\n    w: int\n"
    )
    nodes = [node for node in ast.parse(code).body if isinstance(node, ast.ClassDef)]
    assert [kind_of(node) for node in nodes] == ["dataclass", "struct", "namedtuple", "pydantic"]
    assert expected_kind("client/options.py:A", nodes[0], "dataclass") == "dataclass"
    assert expected_kind("client/flows/x.py:B", nodes[1], "struct") == "struct"
    assert expected_kind("storage/base.py:C", nodes[2], "namedtuple") == "namedtuple"
    assert expected_kind("server/app.py:D", nodes[3], "pydantic") == "pydantic"
    assert expected_kind("client/flows/x.py:D", nodes[3], "pydantic") == "struct"
    assert expected_kind("repo/gc.py:B", nodes[1], "struct") == "dataclass"


#: The command modules: each loads what its command reads when it runs (the command-module boundary).
COMMAND_MODULES = PACKAGE / "cli" / "commands"


def unjustified_lazy_imports(source: str) -> list[int]:
    """Lines of imports inside functions with no comment saying why: a run of consecutive import
    statements is justified by a comment on one of its lines or on the line just above it."""
    lines = source.splitlines()
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        imports = sorted(
            (node for node in ast.walk(function) if isinstance(node, ast.Import | ast.ImportFrom)),
            key=lambda node: node.lineno,
        )
        run: list[ast.stmt] = []
        for node in imports:
            if run and node.lineno > (run[-1].end_lineno or run[-1].lineno) + 1:
                found += _unjustified(run, lines)
                run = []
            run.append(node)
        found += _unjustified(run, lines)
    return sorted(set(found))


def _unjustified(run: list[ast.stmt], lines: list[str]) -> list[int]:
    if not run:
        return []
    first, last = run[0].lineno, run[-1].end_lineno or run[-1].lineno
    said = any("#" in lines[number - 1] for number in range(max(1, first - 1), last + 1))
    return [] if said else [node.lineno for node in run]


def test_lazy_imports_sit_at_command_boundaries_or_say_why() -> None:
    offences = [
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if COMMAND_MODULES not in path.parents
        for line in unjustified_lazy_imports(path.read_text())
    ]
    assert offences == [], "an import inside a function says why it is there:\n" + "\n".join(offences)


def test_the_lazy_import_check_reads_runs_and_comments() -> None:
    code = (
        "def a():\n    import x\n    import y\n"
        "def b():\n    # only here: x is slow to load\n    import x\n    import y\n"
        "def c():\n    import x  # loads on use\n"
    )
    assert unjustified_lazy_imports(code) == [2, 3]
