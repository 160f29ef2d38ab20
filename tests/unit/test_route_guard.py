"""Every route the server declares passes its one guard (server/guard.py ``admitted``: not draining, a
known token with its grant, a request slot), other than a listed, documented set. The routes come from the
app itself, and whether one passes the guard is read from its code: the route's endpoint, or a dependency it
declares, calls ``admitted`` (itself, or through a function of the server's that does)."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, APIWebSocketRoute, iter_route_contexts
from fastapi.testclient import TestClient
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute

from smart_transfer.server.app import create_app
from smart_transfer.server.settings import ServerSettings

#: The routes that do not pass the guard, and why (docs/explanation/security.md says the same).
UNGUARDED = {
    "GET /healthz health": "liveness for balancers: says only that the process answers",
    "GET /readyz ready": "readiness for balancers: says only whether the store and index answer",
    "GET /metrics metrics": "authenticates itself unless --metrics-public; answers while draining, holds no slot",
    "GET /favicon.ico favicon": "a static icon",
    "GET /docs docs": "the OpenAPI page (the document lists routes, no data)",
    "GET /docs/static/{file} docs_static": "the OpenAPI page's script and style",
    "GET /openapi.json openapi": "the OpenAPI document",
    "GET /delta-sharing/openapi.json openapi": "the Delta Sharing face's OpenAPI document",
    "WEBSOCKET /{path:path} no_such_route": "a WebSocket to no session route: refused with NoSuchRoute",
    "GET /ui/signin sign_in_form": "where a browser gives the token the guard then checks",
    "POST /ui/signin sign_in": "checks the token it is given, and keeps it for the browser",
    "POST /ui/signout sign_out": "forgets the browser's token",
    "GET /ui/static/{file} static": "the web view's style sheet and script",
    "GET /ui/{rest:path} unknown": "the web view's 404 page",
}
#: Routes of the embedded store: each request carries the store's own signed, expiring URL, checked there.
STORE_PREFIX = "/_store/"


def _calls(function: Callable[..., Any]) -> set[str]:
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return set()
    return {
        node.func.id if isinstance(node.func, ast.Name) else node.func.attr
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute)
    }


def _server_functions(function: Callable[..., Any]) -> Iterator[Callable[..., Any]]:
    """The server's own functions ``function`` calls by name: module globals and closure cells."""
    called = _calls(function)
    names: dict[str, Any] = dict(getattr(function, "__globals__", {}))
    code, cells = getattr(function, "__code__", None), getattr(function, "__closure__", None) or ()
    if code is not None:
        names.update({name: cell.cell_contents for name, cell in zip(code.co_freevars, cells, strict=True)})
    for name in called:
        helper = names.get(name)
        if callable(helper) and getattr(helper, "__module__", "").startswith("smart_transfer.server"):
            yield helper


def passes_guard(function: Callable[..., Any], depth: int = 3) -> bool:
    """Whether ``function`` calls ``admitted``, itself or through the server's own functions it calls by
    name (at most ``depth`` calls deep)."""
    if "admitted" in _calls(function):
        return True
    return depth > 0 and any(passes_guard(helper, depth - 1) for helper in _server_functions(function))


def _dependencies(dependant: Dependant | None) -> Iterator[Callable[..., Any]]:
    for inner in dependant.dependencies if dependant is not None else ():
        if inner.call is not None:
            yield inner.call
        yield from _dependencies(inner)


class Declared(NamedTuple):
    """A route as the app serves it: its whole path, endpoint, dependencies and methods."""

    path: str
    endpoint: Callable[..., Any]
    dependant: Dependant | None
    methods: frozenset[str]

    @property
    def keys(self) -> list[str]:
        """How UNGUARDED names it: one ``METHOD path endpoint`` per method (HEAD goes with GET)."""
        return [f"{method} {self.path} {self.endpoint.__name__}" for method in sorted(self.methods - {"HEAD"})]


def declared_routes(routes: Sequence[BaseRoute], prefix: str = "") -> Iterator[Declared]:
    """Every endpoint route under ``routes`` (included routers and mounted apps opened), with its path."""
    for context in iter_route_contexts(routes):
        route = context.original_route
        if isinstance(route, Mount):
            yield from declared_routes(route.routes, prefix + route.path)
        elif isinstance(route, APIRoute | APIWebSocketRoute | Route | WebSocketRoute):
            methods = frozenset(getattr(route, "methods", None) or {"WEBSOCKET"})
            yield Declared(prefix + str(context.path), route.endpoint, getattr(context, "dependant", None), methods)


def _routes(tmp_path: Path) -> list[Declared]:
    return list(declared_routes(create_app(ServerSettings(root=tmp_path / "server"), 8080).routes))


def test_every_route_passes_the_guard_unless_listed(tmp_path: Path) -> None:
    routes = _routes(tmp_path)
    assert len(routes) > 30  # the walk sees every face: REST, smart, Delta Sharing, web view, ops
    unguarded = [
        key
        for route in routes
        if not route.path.startswith(STORE_PREFIX)
        and not any(passes_guard(call) for call in (route.endpoint, *_dependencies(route.dependant)))
        for key in route.keys
        if key not in UNGUARDED
    ]
    assert unguarded == [], "routes that skip the guard (list them in UNGUARDED, and why, if meant):\n" + "\n".join(
        unguarded
    )


def test_the_listed_exceptions_are_routes_of_the_app(tmp_path: Path) -> None:
    keys = {key for route in _routes(tmp_path) for key in route.keys}
    assert set(UNGUARDED) - keys == set()


def test_the_guard_check_tells_a_guarded_function_from_one_that_is_not() -> None:
    def admitted(*_: object) -> None: ...

    def guarded() -> None:
        admitted()

    def through_helper() -> None:
        guarded()

    def open_door() -> None:
        print("hello")

    assert passes_guard(guarded)
    assert not passes_guard(open_door)
    assert not passes_guard(through_helper)  # the helper must be the server's own


#: A valid value for each path parameter the routes take, so a request reaches the guard (a malformed
#: one would be refused before it, with 400).
_PLACEHOLDERS = {
    "dataset": "ds",
    "name": "ds",
    "kind": "data",
    "object_hash": "f1220" + "ab" * 32,
    "block_hash": "f1220" + "ab" * 32,
    "slice_hash": "f1220" + "ab" * 32,
    "ref": "0",
    "share": "smart-transfer",
    "schema": "datasets",
    "table": "ds",
}


def _url(path: str) -> str:
    for name, value in _PLACEHOLDERS.items():
        path = path.replace("{" + name + "}", value)
    return path


def test_every_guarded_route_refuses_a_request_without_a_token(tmp_path: Path) -> None:
    """The same walk, told by behaviour: on a server with tokens, every route not listed answers 401 to a
    request that carries none, before it does anything else."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text('{"tokens": [{"subject": "a", "sha256": "' + "0" * 64 + '", "read": ["*"]}]}')
    app = create_app(ServerSettings(root=tmp_path / "server", tokens_file=tokens), 8080)
    asked = []
    with TestClient(app, base_url="http://127.0.0.1:8080") as client:
        for context in iter_route_contexts(app.routes):
            route = context.original_route
            if not isinstance(route, APIRoute) or "{" in _url(str(context.path)):
                continue
            for method in sorted(route.methods - {"HEAD"}):
                if f"{method} {context.path} {route.endpoint.__name__}" in UNGUARDED:
                    continue
                answer = client.request(method, _url(str(context.path)), content=b"x")
                asked.append(f"{method} {context.path}")
                assert answer.status_code == 401, f"{method} {context.path}: {answer.status_code}"
    assert len(asked) > 15
