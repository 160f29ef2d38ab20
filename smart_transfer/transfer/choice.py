"""The one choice of HTTP library for object transfers, apart from the interface it implements
(``transport.py``): which implementation of ``ObjectTransport`` moves a flow's objects, by one stated rule
(``open_transport``), and each implementation by name for the tests and benchmarks that compare them
(``open_library``). The implementations load only when a transport opens: a command that moves no object
never imports a network library."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from smart_transfer.transfer.limits import Timeouts
from smart_transfer.transfer.ratelimit import RateLimiter
from smart_transfer.transfer.transport import ObjectTransport


@contextlib.asynccontextmanager
async def open_library(library: str, parallel: int, timeouts: Timeouts | None = None) -> AsyncIterator[ObjectTransport]:
    """A transport of the named ``library`` (one of ``transport.LIBRARIES``) with its own pool of at most
    ``parallel`` connections, closed on exit; what the tests and benchmarks compare. Flows use
    ``open_transport``, which chooses."""
    if library == "libcurl":
        # each library loads only when a transport of it opens
        from smart_transfer.transfer.curl import CurlEngine

        engine = CurlEngine(parallel)
        try:
            yield engine
        finally:
            engine.close()
        return
    from smart_transfer.transfer import aio  # likewise: aiohttp and its TLS contexts load only here

    async with aio.make_session(parallel, timeouts) as session:
        yield aio.AiohttpTransport(session)


@contextlib.asynccontextmanager
async def open_transport(
    parallel: int, timeouts: Timeouts, limiter: RateLimiter | None = None, *, storage: bool = True
) -> AsyncIterator[ObjectTransport]:
    """The one choice of HTTP library, by one rule: libcurl moves every object to or from storage's
    presigned URLs (small, mid-size, ranges, parts: it costs a fraction of aiohttp's CPU); aiohttp
    moves an object only when a global rate limit is set (libcurl's callbacks cannot wait for it) or
    when the source is not storage (``storage`` false: peers). A channel whose objects go through its
    own server (the simple protocol) brings its own transport instead (``PullChannel.object_transport``).
    At most ``parallel`` connections; ``timeouts`` bound the requests a new aiohttp session makes of its
    own."""
    if storage and limiter is None:
        async with open_library("libcurl", parallel) as transport:
            yield transport
        return
    from smart_transfer.transfer import aio  # only here: its import and TLS contexts cost a quarter second

    async with aio.make_session(parallel, timeouts) as session:
        yield aio.AiohttpTransport(session, limiter)
