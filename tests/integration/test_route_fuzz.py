"""A fuzzer for every route the app declares (listed from the app itself, the web view's and the Delta
Sharing face's included): each path parameter and each query parameter in turn gets hostile text (numbers
longer than Python converts, unicode digits, signs, decimals, NUL, ``../``), the others a valid value, by
every method the route takes, against a real server holding a real dataset. No answer may be a 5xx, a
traceback, or the web view's "failed to build this page".

Query parameters come from the routes' declarations, and for the web view, which reads its own (to answer
a bad one with a page), from the names its code reads (``query_params.get("…")``, ``raw.get("…")``)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute

from smart_transfer.server.app import create_app
from smart_transfer.server.settings import ServerSettings
from tests.conftest import ROOT, ServerProcess, make_files, run_cli, start_server, summary

DATASET = "fz"
#: Text no route may answer with a 5xx, a traceback or a failed page.
HOSTILE = [
    "9" * 4301,
    "9" * 5000,
    "9" * 4300,
    str(2**63),
    str(2**64),
    "-1",
    "-0",
    "+5",
    "1.5",
    "1e3",
    "NaN",
    "\u0663",  # ARABIC-INDIC DIGIT THREE
    "\uff11\uff12",  # FULLWIDTH ONE TWO
    "\u00b2",  # SUPERSCRIPT TWO
    "\x00",
    "%00",
    "../",
    "../../etc/passwd",
    "..",
    "",
    " ",
    "1 ",
    "0x10",
    "1_000",
]
#: A valid value for each path parameter name the app uses (others get ``x``).
VALID = {
    "dataset": DATASET,
    "name": DATASET,
    "share": "smart-transfer",
    "schema": "datasets",
    "table": DATASET,
    "ref": "1",
    "kind": "data",
    "file": "ui.css",
    "rest": "nowhere",
}
FAILED_PAGE = b"failed to build this page"
_UI_READS = re.compile(r"""(?:query_params|raw)\.get\(\s*"(\w+)\"""")


def _ui_query_names() -> set[str]:
    """The query parameters the web view reads itself."""
    names: set[str] = set()
    for path in (ROOT / "smart_transfer" / "server" / "ui").glob("*.py"):
        names.update(_UI_READS.findall(path.read_text()))
    return names


def _declared(routes: list[BaseRoute], prefix: str = "") -> Iterator[tuple[str, BaseRoute]]:
    """Every route with its full path, through included routers and mounted apps."""
    for route in routes:
        included = getattr(route, "original_router", None)  # FastAPI's record of include_router
        if included is not None:
            yield from _declared(included.routes, prefix + route.include_context.prefix)  # type: ignore[attr-defined]
        elif isinstance(route, Mount):
            yield from _declared(route.routes, prefix + route.path)
        else:
            yield prefix, route


def _routes(tmp_path: Path) -> list[tuple[str, set[str], list[str], list[str]]]:
    """(path, methods, path parameters, query parameters) of every route of the app."""
    app = create_app(ServerSettings(root=tmp_path / "routes"), 8080)
    ui_names = sorted(_ui_query_names())
    found = []
    for prefix, route in _declared(app.routes):
        path = prefix + str(getattr(route, "path", ""))
        params = sorted(getattr(route, "param_convertors", {}))
        if isinstance(route, WebSocketRoute):
            found.append((path, {"GET"}, params, []))
        elif isinstance(route, APIRoute):
            query = [p.alias for p in route.dependant.query_params]
            if path.startswith("/ui"):
                query = sorted({*query, *ui_names})
            found.append((path, set(route.methods), params, query))
        elif isinstance(route, Route):
            found.append((path, set(route.methods or {"GET"}), params, []))
    return found


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, dict[str, str]]]:
    root = tmp_path_factory.mktemp("route-fuzz")
    server = start_server(root / "server")
    workspace = root / "ws"
    run_cli("add", DATASET, *map(str, make_files(root / "in", 2, 64)), workspace=workspace)
    summary(run_cli("push", DATASET, f"{server.url}/{DATASET}", "--json", workspace=workspace))
    head = httpx.get(f"{server.url}/{DATASET}/refs/head").text
    try:
        yield server, {**VALID, "block_hash": head, "object_hash": head, "slice_hash": head, "hash": head}
    finally:
        server.stop()


def _url(server: ServerProcess, path: str, values: dict[str, str], query: dict[str, str]) -> str:
    filled = re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: quote(values.get(m.group(1), "x"), safe=""), path)
    pairs = "&".join(f"{quote(key, safe='')}={quote(value, safe='')}" for key, value in query.items())
    return f"{server.url}{filled}" + (f"?{pairs}" if pairs else "")


def _check(client: httpx.Client, method: str, url: str) -> int:
    answer = client.request(method, url, content=b"" if method in ("POST", "PUT") else None)
    where = f"{method} {url[:200]}"
    assert answer.status_code < 500, (where, answer.status_code, answer.text[:500])
    assert b"Traceback" not in answer.content and FAILED_PAGE not in answer.content, (where, answer.text[:500])
    return answer.status_code


def test_every_route_survives_hostile_path_and_query_values(
    fuzzed: tuple[ServerProcess, dict[str, str]], tmp_path: Path
) -> None:
    server, valid = fuzzed
    routes = _routes(tmp_path)
    reached: Counter[str] = Counter()
    with httpx.Client(timeout=60, follow_redirects=False) as client:
        for path, methods, path_params, query_params in routes:
            for method in sorted(methods - {"HEAD"}) or ["GET"]:
                for name in [*path_params, *query_params]:
                    for value in HOSTILE:
                        values = {**valid, name: value} if name in path_params else valid
                        query = {name: value} if name in query_params else {}
                        _check(client, method, _url(server, path, values, query))
                        reached[path] += 1
                _check(client, method, _url(server, path, valid, {}))
                reached[path] += 1
    assert {path for path, *_ in routes} == set(reached)
    assert len(routes) >= 30 and any(path.startswith("/ui/datasets/{name}/blocks") for path in reached)
    assert any(path.startswith("/delta-sharing/") for path in reached)


def test_the_fuzzer_lists_the_web_views_own_query_parameters() -> None:
    assert {"page", "per", "from", "to", "last", "q", "sort", "order"} <= _ui_query_names()
