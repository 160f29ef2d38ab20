"""Object bytes move through one seam (transfer/transport.py): outside the two implementations of
ObjectTransport (libcurl, aiohttp), the one place that chooses between them (transfer/choice.py), and the
one place a channel wraps its own REST session (the simple protocol's objects go through its server), no
function of the data plane, the flows or the transports takes an HTTP library's engine or session to
choose between them; they take the transport, which each channel provides."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "smart_transfer"
#: The modules that move objects or drive their moves.
SCANNED = (PACKAGE / "transfer", PACKAGE / "client" / "flows")
#: What makes a transport of one library: called only by the chooser, the implementations, and the one
#: place a channel wraps its own session.
CONSTRUCTORS = {"AiohttpTransport", "CurlEngine", "open_library"}
#: The two implementations, where an engine or a session is theirs to take.
IMPLEMENTATIONS = {PACKAGE / "transfer" / "curl.py", PACKAGE / "transfer" / "aio.py"}
#: The one place that chooses (it is handed no session: only bounds), and the one place a channel wraps
#: its own session in a transport (it takes the REST client that holds it).
CHOOSER = (PACKAGE / "transfer" / "choice.py", "open_transport")
CHANNEL_OWN = (PACKAGE / "client" / "transports" / "simple.py", "through_server")
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
        if (path, function) in (CHOOSER, CHANNEL_OWN):
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


def _constructions(path: Path) -> list[str]:
    """``function: Constructor`` for each call of a transport's constructor in the module at ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name | ast.Attribute):
                    name = call.func.id if isinstance(call.func, ast.Name) else call.func.attr
                    if name in CONSTRUCTORS:
                        found.append(f"{node.name}: {name}")
    return found


def test_only_the_chooser_and_a_channels_own_session_make_a_transport_of_a_library() -> None:
    allowed = {CHOOSER, CHANNEL_OWN}
    made = [
        f"{path.relative_to(PACKAGE)}: {construction}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in IMPLEMENTATIONS
        for construction in _constructions(path)
        if (path, construction.split(":")[0]) not in allowed and path != CHOOSER[0]
    ]
    assert made == [], "choose the library in transfer/choice.py:\n" + "\n".join(made)
    assert any(_constructions(CHANNEL_OWN[0])), "the simple channel wraps its own session"
