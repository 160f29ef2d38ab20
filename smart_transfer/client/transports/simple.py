"""The simple transport: the same pull and push over the REST routes only (one request per block).
Used with ``--protocol simple`` and as the fallback when direct storage transfers fail for network
reasons (then objects stream through the server: ``redirect=False``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from typing import TypeVar

import aiohttp
import orjson
from pydantic import BaseModel, ValidationError

from smart_transfer.client.options import ClientOptions
from smart_transfer.client.remote import RemoteDataset, redact
from smart_transfer.client.transports.base import (
    Lacking,
    LocalChain,
    PullChannel,
    PullStart,
    PushChannel,
    PushStart,
    Transport,
    UploadTerms,
    Urls,
)
from smart_transfer.errors import LocalError, RemoteError, from_protocol
from smart_transfer.model import ModelError, Multihash, NewBlock, ObjectKind, checkpoint_refs
from smart_transfer.model.manifest import PageSource, pages_wanted
from smart_transfer.model.manifest_pages import MAX_LEVEL
from smart_transfer.model.walk import walk_chain_async
from smart_transfer.protocol import DEFAULT_OBJECTS_PER_PAGE, authorization
from smart_transfer.protocol.codes import ErrorCode, code_of_status
from smart_transfer.protocol.errors import ProtocolError, parse_details
from smart_transfer.protocol.messages import HttpRequest, ObjectFile, TransferPlan
from smart_transfer.protocol.rest import DatasetInfo
from smart_transfer.sync.attach import check_expected_head
from smart_transfer.sync.bundle import Bundle, check_bundle
from smart_transfer.transfer.aio import AiohttpTransport, make_session
from smart_transfer.transfer.http import Timeouts
from smart_transfer.transfer.mover import Transfer
from smart_transfer.transfer.pieces import in_parallel
from smart_transfer.transfer.ratelimit import RateLimiter
from smart_transfer.transfer.transport import ObjectTransport

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
#: Checkpoint manifest pages a simple pull fetches at once (small objects: latency, not bandwidth).
PAGE_FETCH_PARALLEL = 8


def status_error(url: str, status: int, body: bytes) -> RemoteError:
    """The server's typed error body as a RemoteError (or one made from the status alone)."""
    try:
        error = orjson.loads(body)["error"]
        code, message = ErrorCode(error["code"]), str(error["message"])
        raw = error.get("details") if isinstance(error.get("details"), dict) else {}
        return RemoteError(code, message, parse_details(code, raw), raw)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        text = body[:300].decode("utf-8", "replace")
        return RemoteError(code_of_status(status), f"{redact(url)}: HTTP {status}: {text}")


class RestSession:
    """REST calls to one server with one token."""

    def __init__(self, http: aiohttp.ClientSession, token: str | None) -> None:
        self.http = http
        self.headers = authorization(token)

    async def call(
        self,
        method: str,
        url: str,
        ok: tuple[int, ...],
        *,
        data: bytes | str | None = None,
        headers: dict[str, str] | None = None,
        allow_redirects: bool = True,
    ) -> tuple[int, bytes]:
        """One request; a status not in ``ok`` raises the server's typed error."""
        try:
            async with self.http.request(
                method, url, data=data, headers={**self.headers, **(headers or {})}, allow_redirects=allow_redirects
            ) as response:
                body = await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise LocalError(
                ErrorCode.UNREACHABLE, f"cannot reach {redact(url)}: {exc or type(exc).__name__}"
            ) from None
        if response.status not in ok:
            raise status_error(url, response.status, body)
        return response.status, body

    async def get_model(self, url: str, model: type[M]) -> M:
        """GET ``url`` and parse its JSON body as ``model``."""
        _, body = await self.call("GET", url, (200,))
        try:
            return model.model_validate_json(body)
        except ValidationError as exc:
            raise LocalError(
                ErrorCode.BAD_MESSAGE, f"{redact(url)}: not a smart-transfer answer ({exc.error_count()} error(s))"
            ) from None


class RestClient(RestSession):
    """The REST calls of one remote dataset."""

    def __init__(self, http: aiohttp.ClientSession, remote: RemoteDataset, token: str | None, redirect: bool) -> None:
        super().__init__(http, token)
        self.remote = remote
        self.redirect = redirect

    async def describe(self, block: Multihash | None = None) -> DatasetInfo:
        """``GET /{dataset}``: the dataset's head, size and, given ``block``, where that block is on its chain."""
        query = f"?block={block}" if block is not None else ""
        return await self.get_model(f"{self.remote.url}{query}", DatasetInfo)

    async def head(self) -> Multihash | None:
        """The remote head, None when the dataset does not exist."""
        try:
            _, body = await self.call("GET", f"{self.remote.url}/refs/head", (200,))
        except RemoteError as exc:
            if exc.code is ErrorCode.DATASET_NOT_FOUND:
                return None
            raise
        try:
            return Multihash.parse(body.decode("ascii", "replace").strip())
        except ModelError:
            raise LocalError(ErrorCode.INVALID_BLOCKS, "the server's head is not a hash") from None

    async def block(self, block_hash: Multihash) -> bytes:
        """The bytes of one block (``GET {dataset}/blocks/{hash}``)."""
        return (await self.call("GET", f"{self.remote.url}/blocks/{block_hash}", (200,)))[1]

    def object_request(self, kind: str, object_hash: str, method: str) -> HttpRequest:
        """The REST request that moves one object (a GET may redirect to storage unless ``redirect`` is off)."""
        url = self.remote.object_url(kind, object_hash)
        if method == "PUT":
            # the server answers at once when it already holds the object (a re-run): no body is sent
            headers = {**self.headers, "Expect": "100-continue"}
            return HttpRequest(method="PUT", url=url, headers=headers, expires_at=0)
        suffix = "" if self.redirect else "?redirect=false"
        return HttpRequest(method="GET", url=url + suffix, headers=self.headers, expires_at=0)

    async def object_exists(self, item: ObjectFile) -> bool:
        """Whether the server already holds ``item`` (a HEAD, no redirect followed)."""
        url = self.remote.object_url(item.kind, item.physical_hash)
        status, _ = await self.call("HEAD", url, (200, 307, 404), allow_redirects=False)
        return status != 404

    async def walk(self, head: Multihash, local: LocalChain) -> tuple[list[NewBlock], Multihash | None]:
        """Remote blocks from ``head`` back to the first one on the local chain (oldest first)."""
        try:
            walk = await walk_chain_async(head, self.block, local.contains)
        except ModelError as exc:
            raise LocalError(ErrorCode.INVALID_BLOCKS, f"the server sent an invalid block: {exc}") from None
        return walk.blocks, walk.base


def _wanted(root: Multihash, source: PageSource) -> list[Multihash]:
    """Pages below ``root`` still to fetch; none when it is malformed (check_bundle says how)."""
    data = source(root)
    try:
        return [page for page, _ in pages_wanted(data, source)] if data is not None else []
    except ModelError:
        return []


@asynccontextmanager
async def through_server(rest: RestClient, limiter: RateLimiter | None) -> AsyncIterator[ObjectTransport]:
    """The transport of a simple channel's objects: they ask the same server first (and go through it
    when it streams them), so they share the REST session's pool of ``--parallel`` connections, not two."""
    yield AiohttpTransport(rest.http, limiter)


class SimplePull(PullChannel):
    """A pull over the REST routes: the chain walked block by block, objects through their routes."""

    def __init__(self, rest: RestClient) -> None:
        self.rest = rest

    def object_transport(
        self, parallel: int, timeouts: Timeouts, limiter: RateLimiter | None
    ) -> AbstractAsyncContextManager[ObjectTransport]:
        return through_server(self.rest, limiter)

    async def start(self, local: LocalChain, force: bool, announce: str | None = None) -> PullStart:
        head = await self.rest.head()
        if head is None:
            raise RemoteError(ErrorCode.DATASET_NOT_FOUND, f"dataset {self.rest.remote.name} does not exist")
        blocks, base = await self.rest.walk(head, local)
        manifests = await self._manifest_pages([r.physical_hash for r in checkpoint_refs(blocks)], local.pages)
        try:
            bundle = check_bundle(blocks, manifests, local.pages)
        except ProtocolError as exc:
            raise from_protocol(exc, remote=False, context="the server sent invalid metadata: ") from None
        return PullStart(head, base, bundle, DEFAULT_OBJECTS_PER_PAGE)

    async def urls(self, page: Sequence[ObjectFile]) -> Urls:
        return [(item, self.rest.object_request(item.kind, item.physical_hash, "GET")) for item in page]

    async def _checkpoint_object(self, object_hash: Multihash) -> bytes:
        request = self.rest.object_request(ObjectKind.CHECKPOINT.value, str(object_hash), "GET")
        return (await self.rest.call("GET", request.url, (200,)))[1]

    async def _manifest_pages(self, roots: list[Multihash], local: PageSource) -> dict[Multihash, bytes]:
        """The manifests ``roots`` and their pages the workspace lacks, fetched level by level (each
        round one level deeper, so at most MAX_LEVEL + 1 rounds); check_bundle checks them after."""
        known: dict[Multihash, bytes | None] = {}
        fetched: dict[Multihash, bytes] = {}

        def source(page: Multihash) -> bytes | None:
            if page not in known:
                known[page] = local(page)
            return known[page]

        wanted = [r for r in dict.fromkeys(roots) if source(r) is None]
        for _ in range(MAX_LEVEL + 1):
            if not wanted:
                break
            bodies = await in_parallel(wanted, self._checkpoint_object, PAGE_FETCH_PARALLEL)
            fetched.update(zip(wanted, bodies, strict=True))
            known.update(fetched)
            wanted = list(dict.fromkeys(page for root in roots for page in _wanted(root, source)))
        return fetched


class SimplePush(PushChannel):
    """A push over the REST routes: blocks and objects PUT one by one, then head moved with If-Match."""

    def __init__(self, rest: RestClient, parallel: int) -> None:
        self.rest = rest
        self.parallel = parallel
        self.current: Multihash | None = None
        self.force = False
        #: The blocks sent but not PUT yet.
        self.blocks: list[NewBlock] = []

    def object_transport(
        self, parallel: int, timeouts: Timeouts, limiter: RateLimiter | None
    ) -> AbstractAsyncContextManager[ObjectTransport]:
        return through_server(self.rest, limiter)

    async def start(self, local: LocalChain, expected: Multihash | None, plan: TransferPlan, force: bool) -> PushStart:
        self.current, self.force = await self.rest.head(), force
        try:
            check_expected_head(expected, self.current, force)  # what a smart server would answer
        except ProtocolError as exc:
            raise from_protocol(exc, remote=True) from None
        common = self.current
        if self.current is not None and not local.contains(self.current):
            common = (await self.rest.walk(self.current, local))[1] if force else None
        return PushStart(self.current, common)

    async def send_blocks(self, bundle: Bundle) -> UploadTerms:
        # PUT with the first upload or the head move, as a smart server writes them: a push that ends
        # after asking what the server holds (``lacking``) leaves nothing there
        self.blocks = list(bundle.blocks)
        # every object streams through the server in one request (which stores a large one in parts)
        return UploadTerms(DEFAULT_OBJECTS_PER_PAGE)

    async def _put_blocks(self) -> None:
        async def put(item: NewBlock) -> None:
            await self.rest.call("PUT", f"{self.rest.remote.url}/blocks/{item.hash}", (200, 201), data=item.data)

        blocks, self.blocks = self.blocks, []
        await in_parallel(blocks, put, self.parallel)

    async def urls(self, page: Sequence[ObjectFile]) -> Urls:
        await self._put_blocks()
        answers: dict[tuple[str, str], Transfer | None] = {}

        async def ask(item: ObjectFile) -> None:
            exists = await self.rest.object_exists(item)
            request = self.rest.object_request(item.kind, item.physical_hash, "PUT")
            answers[(item.kind, item.physical_hash)] = None if exists else request

        await in_parallel(page, ask, self.parallel)
        return [(item, answers[(item.kind, item.physical_hash)]) for item in page]

    async def lacking(self, page: Sequence[ObjectFile]) -> list[Lacking]:
        # a HEAD answers for committed objects only: a staged copy (a PUT before head moved) is not told apart
        held: set[ObjectFile] = set()

        async def ask(item: ObjectFile) -> None:
            if await self.rest.object_exists(item):
                held.add(item)

        await in_parallel(page, ask, self.parallel)
        return [Lacking(item) for item in page if item not in held]

    async def finish(self, new_head: Multihash) -> Multihash:
        await self._put_blocks()
        precondition = {"If-Match": f'"{self.current}"'} if self.current is not None else {"If-None-Match": "*"}
        url = f"{self.rest.remote.url}/refs/head" + ("?force=true" if self.force else "")
        await self.rest.call("PUT", url, (200,), data=str(new_head), headers=precondition)
        return new_head


class SimpleTransport(Transport):
    """Pull and push over the REST routes. ``redirect=False`` streams objects through the server."""

    name = "simple"

    def __init__(self, token: str | None = None, options: ClientOptions | None = None, redirect: bool = True) -> None:
        """``options``: parallelism and bounds (see ``ClientOptions``)."""
        self.token = token
        self.options = options or ClientOptions()
        self.parallel = self.options.parallel
        self.redirect = redirect

    def object_timeouts(self, timeouts: Timeouts, upload: bool) -> Timeouts:
        """Storage's own bounds for downloads redirected to it (the server answers the redirect at
        once, so a stalled store fails within ``--read-timeout``); the answer timeout for what goes
        through the server: uploads (answered once stored) and downloads it streams."""
        if self.redirect and not upload:
            return timeouts
        return replace(timeouts, read=max(timeouts.read, self.options.answer_timeout))

    def _http(self) -> aiohttp.ClientSession:
        """REST calls wait for the server's answer (not storage's) up to the answer timeout."""
        return make_session(self.parallel, self.options.answer_timeouts)  # objects too pass through the server

    @asynccontextmanager
    async def pull(self, remote: RemoteDataset) -> AsyncIterator[PullChannel]:
        async with self._http() as http:
            yield SimplePull(RestClient(http, remote, self.token, self.redirect))

    @asynccontextmanager
    async def push(self, remote: RemoteDataset) -> AsyncIterator[PushChannel]:
        async with self._http() as http:
            yield SimplePush(RestClient(http, remote, self.token, self.redirect), self.parallel)
