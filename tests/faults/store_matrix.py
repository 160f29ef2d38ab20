"""The store-fault matrix's shared parts: a misbehaving store (tests/faults/proxy.py, in front of the
real local S3 and of a peer) x object classes x pull/push, through the real CLI with low bounds. The
pull cases are in test_store_matrix_pull.py and the push cases in test_store_matrix_push.py, so that
the two halves run side by side."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import S3Env, ServerProcess, backend_args, run_cli, start_server, summary
from tests.faults.bounded import Bounds, fresh, local_head
from tests.faults.proxy import STORE_FAULTS, Proxy, Rule

KIB, MIB = 1024, 1024 * 1024
BOUNDS = Bounds()
#: A case's bound and, for the first, its module's set-up (up to ten pushes and pulls, slow under load).
CASE_TIMEOUT = BOUNDS.hard_timeout(11 * MIB) + 900
#: Faults one retry absorbs (attempts = 2): the run must succeed with exactly the right data.
ONCE = ("500", "503", "reset", "short")
#: Class -> (object count, object size, extra CLI flags).
CLASSES: dict[str, tuple[int, int, list[str]]] = {
    "small-curl": (3, 100 * KIB, []),
    "small-aiohttp": (3, 100 * KIB, ["--limit-rate", "1G"]),  # a rate limit moves everything to aiohttp
    "mid": (1, 2 * MIB, []),
    "ranged": (1, 3 * MIB, ["--range-threshold", "1M", "--range-size", "1M"]),
    "simple": (3, 100 * KIB, ["--protocol", "simple"]),
    "peer": (3, 100 * KIB, []),
    "multipart": (1, 11 * MIB, []),  # the server's threshold is 6M, parts 5M: three parts
}
PULL_CLASSES = ("small-curl", "small-aiohttp", "mid", "ranged", "simple", "peer")
PUSH_CLASSES = ("small-curl", "small-aiohttp", "mid", "multipart")
CASES = [(f, "always") for f in STORE_FAULTS] + [(f, "once") for f in ONCE]
#: The classes a fault that fires once is tried on: one per engine and path a retry takes (the other
#: classes share these retry paths; every class meets every fault that always fires).
ONCE_CLASSES = ("small-curl", "small-aiohttp", "ranged", "simple", "multipart")


def _cases(classes: tuple[str, ...]) -> list[tuple[str, str, str]]:
    return [(k, f, t) for k in classes for f, t in CASES if t == "always" or k in ONCE_CLASSES]


PULL_CASES, PUSH_CASES = _cases(PULL_CLASSES), _cases(PUSH_CLASSES)


@dataclass
class Stage:
    """A server on the local S3 whose presigned URLs point at a fault-injecting proxy."""

    proxy: Proxy
    server: ServerProcess
    root: Path


@contextlib.contextmanager
def matrix_stage(s3_env: S3Env, root: Path) -> Iterator[Stage]:
    """The proxy and the server presigning for it, stopped when the block ends."""
    proxy = Proxy(s3_env.endpoint)
    try:
        server = start_server(
            root / "server",
            *backend_args("s3", s3_env),
            "--s3-public-endpoint",
            proxy.url,
            "--multipart-threshold",
            "6M",
            "--part-size",
            "5M",
            "--peer-ttl",
            "86400",  # a peer announced at set-up stays listed for the whole matrix
        )
        server.backend = "s3"
        try:
            yield Stage(proxy, server, root)
        finally:
            server.stop()
    finally:
        proxy.stop()


def rule(fault: str, times: str, method: str, key: str) -> Rule:
    """The proxy rule of one case: ``fault`` on every matching request, or on the first one only."""
    return Rule(fault, method=method, key=key, times=1 if times == "once" else None)


def server_local_head(stage: Stage, name: str) -> str | None:
    """The server's head as a workspace's ``log --json`` shows it (pulled fresh, no faults)."""
    scratch = fresh(stage.root, "scratch")
    summary(run_cli("pull", f"{stage.server.url}/{name}", "--json", workspace=scratch))
    return local_head(scratch, name)
