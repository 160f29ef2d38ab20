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
import dataclasses
import importlib
import pkgutil
import re
from pathlib import Path
from typing import NamedTuple

import msgspec
import pydantic

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


def kind_of(cls: type) -> str | None:
    """The record kind of a class, by what it is at run time (a subclass of a project base counts as the
    base's kind); None: not a record."""
    if dataclasses.is_dataclass(cls):
        return "dataclass"
    if issubclass(cls, msgspec.Struct):
        return "struct"
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return "namedtuple"
    if issubclass(cls, pydantic.BaseModel):
        return "pydantic"
    return None


def _declares_settings(cls: type) -> bool:
    return dataclasses.is_dataclass(cls) and any(field.metadata for field in dataclasses.fields(cls))


def expected_kind(where: str, cls: type, found: str) -> str:
    """The kind the rule asks of class ``cls`` declared at ``where`` (``path:Name``)."""
    path = where.split(":", maxsplit=1)[0]
    if where in JUSTIFIED:
        return found
    if where in SETTINGS or _declares_settings(cls):
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


def records() -> list[tuple[str, type, str]]:
    """Every record class the package defines: ``path:Name``, the class, its kind (every module imported)."""
    found = []
    for info in pkgutil.walk_packages([str(PACKAGE)], "smart_transfer."):
        if info.name.endswith(".__main__"):
            continue  # runs the command line when imported
        module = importlib.import_module(info.name)
        path = info.name.removeprefix("smart_transfer.").replace(".", "/") + ("/__init__.py" if info.ispkg else ".py")
        for cls in vars(module).values():
            if isinstance(cls, type) and cls.__module__ == info.name and (kind := kind_of(cls)) is not None:
                found.append((f"{path}:{cls.__name__}", cls, kind))
    return found


def test_every_record_is_of_the_kind_its_purpose_calls_for() -> None:
    found = records()
    assert len(found) > 100
    wrong = [
        f"{where}: a {kind}, the rule asks for a {expected_kind(where, cls, kind)}"
        for where, cls, kind in found
        if kind != expected_kind(where, cls, kind)
    ]
    assert wrong == [], "\n".join(wrong)


def test_every_justified_exception_names_a_record() -> None:
    assert set(JUSTIFIED) <= {where for where, _, _ in records()}


def test_the_rule_tells_each_kind_apart() -> None:
    @dataclasses.dataclass(frozen=True)
    class Settings:
        x: int = dataclasses.field(default=1, metadata={"declared": True})

    class Base(msgspec.Struct):
        pass

    class Message(Base, frozen=True):  # a subclass of a project base: still a Struct
        y: int

    class Row(NamedTuple):
        z: int

    class Body(pydantic.BaseModel):
        w: int

    kinds = [kind_of(cls) for cls in (Settings, Message, Row, Body, ValueError)]
    assert kinds == ["dataclass", "struct", "namedtuple", "pydantic", None]
    assert expected_kind("client/options.py:Settings", Settings, "dataclass") == "dataclass"
    assert expected_kind("client/flows/x.py:Message", Message, "struct") == "struct"
    assert expected_kind("storage/base.py:Row", Row, "namedtuple") == "namedtuple"
    assert expected_kind("server/app.py:Body", Body, "pydantic") == "pydantic"
    assert expected_kind("client/flows/x.py:Body", Body, "pydantic") == "struct"
    assert expected_kind("repo/gc.py:Message", Message, "struct") == "dataclass"


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
    said = any(_says_why(lines[number - 1]) for number in range(max(1, first - 1), last + 1))
    return [] if said else [node.lineno for node in run]


def _says_why(line: str) -> bool:
    """Whether a line carries a comment that is words, not only a tool's marker (``noqa``, ``type:``)."""
    comment = re.sub(r"noqa(:\s*[A-Z0-9, ]+)?|type:\s*ignore(\[[^]]*\])?|pragma:[^-]*", "", line.partition("#")[2])
    return bool(comment.strip(" -"))


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
        "def d():\n    import x  # noqa: F401\n"
    )
    assert unjustified_lazy_imports(code) == [2, 3, 11]
