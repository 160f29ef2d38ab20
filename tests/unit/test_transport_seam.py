"""Object bytes move through one seam (transfer/transport.py): outside the two implementations of
ObjectTransport (libcurl, aiohttp) and the one place that chooses between them, no function of the data
plane or of the flows takes an HTTP library's engine or session to choose between them; they take the
transport."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "smart_transfer"
#: The modules that move objects, or drive their moves.
SCANNED = (PACKAGE / "transfer", PACKAGE / "client" / "flows")
#: The two implementations, where an engine or a session is theirs to take.
IMPLEMENTATIONS = {PACKAGE / "transfer" / "curl.py", PACKAGE / "transfer" / "aio.py"}
#: The one place that chooses (it may be handed a channel's own session).
CHOOSER = (PACKAGE / "transfer" / "choice.py", "open_transport")
#: Parameter names and annotation words that choose an HTTP library (a parameter named ``session`` is
#: the SDK's session unless its type says otherwise).
NAMES = {"engine", "http"}
TYPES = ("CurlEngine", "ClientSession", "AiohttpTransport", "pycurl")


def _parameters(tree: ast.AST) -> list[tuple[str, ast.arg]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args
            for arg in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
                found.append((node.name, arg))
    return found


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    offences = []
    for function, arg in _parameters(tree):
        if (path, function) == CHOOSER:
            continue
        annotation = ast.unparse(arg.annotation) if arg.annotation is not None else ""
        if arg.arg in NAMES or any(word in annotation for word in TYPES):
            offences.append(f"{path.relative_to(PACKAGE)}: {function}({arg.arg}: {annotation or '?'})")
    return offences


def test_only_the_implementations_and_the_chooser_take_an_http_library() -> None:
    paths = [path for root in SCANNED for path in sorted(root.rglob("*.py")) if path not in IMPLEMENTATIONS]
    assert len(paths) > 10  # the scan sees the data plane and the flows
    offences = [offence for path in paths for offence in _offences(path)]
    assert not offences, "pass the ObjectTransport instead:\n" + "\n".join(offences)


def test_the_scan_finds_an_engine_parameter(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "async def fetch(url: str, engine: object = None) -> None: ...\n"
        "def put(pool: 'aiohttp.ClientSession') -> None: ...\n"
        "def fine(transport: 'ObjectTransport', session: 'Session') -> None: ...\n"
    )
    tree = ast.parse(sample.read_text())
    names = {
        (function, arg.arg)
        for function, arg in _parameters(tree)
        if arg.arg in NAMES or any(word in ast.unparse(arg.annotation or ast.Constant("")) for word in TYPES)
    }
    assert names == {("fetch", "engine"), ("put", "pool")}
