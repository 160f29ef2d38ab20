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
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute

from smart_transfer.server.app import create_app
from smart_transfer.server.settings import ServerSettings

#: The routes that do not pass the guard, and why (docs/explanation/security.md says the same).
UNGUARDED = {
    "/healthz": "liveness for balancers: says only that the process answers",
    "/readyz": "readiness for balancers: says only whether the store and index answer",
    "/metrics": "authenticates itself unless --metrics-public; answers while draining, holds no slot",
    "/favicon.ico": "a static icon",
    "/docs": "the OpenAPI page (the document lists routes, no data)",
    "/docs/static/{file}": "the OpenAPI page's script and style",
    "/openapi.json": "the OpenAPI document",
    "/delta-sharing/openapi.json": "the Delta Sharing face's OpenAPI document",
    "/{path:path}": "a WebSocket to no session route: refused with NoSuchRoute, nothing served",
    "/ui/signin": "where a browser gives the token the guard then checks",
    "/ui/signout": "forgets the browser's token",
    "/ui/static/{file}": "the web view's style sheet and script",
    "/ui/{rest:path}": "the web view's 404 page",
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
    """A route as the app serves it: its whole path, endpoint and dependencies."""

    path: str
    endpoint: Callable[..., Any]
    dependant: Dependant | None


def declared_routes(routes: Sequence[BaseRoute], prefix: str = "") -> Iterator[Declared]:
    """Every endpoint route under ``routes`` (included routers and mounted apps opened), with its path."""
    for context in iter_route_contexts(routes):
        route = context.original_route
        if isinstance(route, Mount):
            yield from declared_routes(route.routes, prefix + route.path)
        elif isinstance(route, APIRoute | APIWebSocketRoute | Route | WebSocketRoute):
            yield Declared(prefix + str(context.path), route.endpoint, getattr(context, "dependant", None))


def _routes(tmp_path: Path) -> list[Declared]:
    return list(declared_routes(create_app(ServerSettings(root=tmp_path / "server"), 8080).routes))


def test_every_route_passes_the_guard_unless_listed(tmp_path: Path) -> None:
    routes = _routes(tmp_path)
    assert len(routes) > 30  # the walk sees every face: REST, smart, Delta Sharing, web view, ops
    unguarded = [
        route.path
        for route in routes
        if route.path not in UNGUARDED
        and not route.path.startswith(STORE_PREFIX)
        and not any(passes_guard(call) for call in (route.endpoint, *_dependencies(route.dependant)))
    ]
    assert unguarded == [], "routes that skip the guard (list them in UNGUARDED, and why, if meant):\n" + "\n".join(
        unguarded
    )


def test_the_listed_exceptions_are_routes_of_the_app(tmp_path: Path) -> None:
    paths = {route.path for route in _routes(tmp_path)}
    assert set(UNGUARDED) - paths == set()


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
