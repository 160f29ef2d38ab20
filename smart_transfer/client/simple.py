"""The Simple Transfer Protocol client: pull and push over the REST routes only.

Used with ``--protocol simple`` and as the fallback when direct storage transfers fail for network
reasons. Blocks are walked one request each (that is what makes the simple protocol slow on long
chains); objects move in parallel and are verified exactly as on the smart path, and the local or
remote head moves only after everything arrived (remote: ``PUT refs/head`` with ``If-Match``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import aiohttp

from smart_transfer.checkpoint.manifest import CheckpointManifest, decode_manifest
from smart_transfer.checkpoint.slot import install_latest
from smart_transfer.client.remote import RemoteDataset
from smart_transfer.client.session import RemoteError
from smart_transfer.model import ChainTip, InvalidMultihash, ModelError, Multihash, validate_extension
from smart_transfer.model.events import Seed
from smart_transfer.protocol.errors import ErrorCode
from smart_transfer.protocol.messages import HttpRequest
from smart_transfer.repo import Workspace
from smart_transfer.repo.dataset import DatasetRepository, NewBlock, ObjectRef, checkpoint_refs, objects_of
from smart_transfer.transfer.http import DEFAULT_PARALLEL, download, make_session, upload
from smart_transfer.transfer.ratelimit import RateLimiter

T = TypeVar("T")
#: Most blocks a simple pull walks before giving up (one request each).
MAX_SIMPLE_WALK = 10_000_000


def _status_error(url: str, status: int, body: bytes) -> RemoteError:
    code = {
        401: ErrorCode.UNAUTHORIZED,
        403: ErrorCode.FORBIDDEN,
        404: ErrorCode.DATASET_NOT_FOUND,
        409: ErrorCode.DIVERGED,
        412: ErrorCode.INVALID_HEAD,
        429: ErrorCode.BUSY,
        503: ErrorCode.STORAGE_UNAVAILABLE,
    }.get(status, ErrorCode.INTERNAL)
    return RemoteError(code, f"{url}: HTTP {status}: {body[:300].decode('utf-8', 'replace')}")


class SimpleProtocol:
    """Pull and push one dataset over REST. ``redirect=False`` streams objects through the server
    (the fallback when storage itself is unreachable)."""

    def __init__(
        self,
        workspace: Workspace,
        *,
        token: str | None = None,
        parallel: int = DEFAULT_PARALLEL,
        limiter: RateLimiter | None = None,
        redirect: bool = True,
        on_bytes: Callable[[int], None] | None = None,
    ) -> None:
        self.workspace = workspace
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.parallel = parallel
        self.limiter = limiter
        self.redirect = redirect
        self.on_bytes = on_bytes or (lambda _n: None)

    def _object_url(self, remote: RemoteDataset, ref: ObjectRef) -> str:
        suffix = "" if self.redirect else "?redirect=false"
        return f"{remote.url}/{ref.kind.value}/{ref.physical_hash}{suffix}"

    async def _get(self, http: aiohttp.ClientSession, url: str, missing_ok: bool = False) -> bytes | None:
        try:
            async with http.get(url, headers=self.headers) as response:
                body = await response.read()
                if response.status == 404 and missing_ok:
                    return None
                if response.status != 200:
                    raise _status_error(url, response.status, body)
                return body
        except aiohttp.ClientError as exc:
            raise RemoteError(ErrorCode.UNREACHABLE, f"cannot reach {url}: {exc}") from None

    async def remote_head(self, http: aiohttp.ClientSession, remote: RemoteDataset) -> Multihash | None:
        body = await self._get(http, f"{remote.url}/refs/head", missing_ok=True)
        if body is None:
            return None
        try:
            return Multihash.parse(body.decode("ascii", "replace").strip())
        except InvalidMultihash:
            raise RemoteError(ErrorCode.INVALID_BLOCKS, "the server's head is not a hash") from None

    async def _parallel(self, items: Sequence[T], work: Callable[[T], Awaitable[None]]) -> None:
        semaphore = asyncio.Semaphore(self.parallel)

        async def one(item: T) -> None:
            async with semaphore:
                await work(item)

        await asyncio.gather(*(one(item) for item in items))

    # -- pull --------------------------------------------------------------------------------------

    async def pull(
        self, dataset: DatasetRepository, remote: RemoteDataset, force: bool
    ) -> tuple[ChainTip | None, ChainTip | None, int, int, int]:
        """Returns (old tip, new tip, blocks, objects moved, bytes moved)."""
        local_tip = await asyncio.to_thread(dataset.tip)
        async with make_session(self.parallel) as http:
            head = await self.remote_head(http, remote)
            if head is None:
                raise RemoteError(ErrorCode.DATASET_NOT_FOUND, f"dataset {remote.name} does not exist at {remote.url}")
            if local_tip is not None and head == local_tip.head:
                return local_tip, local_tip, 0, 0, 0
            if local_tip is not None and await asyncio.to_thread(dataset.sequence_of, head) is not None:
                return local_tip, local_tip, 0, 0, 0  # the local dataset is ahead
            blocks = await self._walk(http, remote, head, local_tip.head if local_tip else None)
            base = local_tip
            if blocks and blocks[0].block.prev_block_hash is None and local_tip is not None:
                if not force:
                    raise RemoteError(ErrorCode.DIVERGED, f"{dataset.name}: local and remote histories diverged")
                seed = blocks[0].block.event
                if not isinstance(seed, Seed) or seed.dataset_id != local_tip.dataset_id:
                    raise RemoteError(ErrorCode.SEED_MISMATCH, f"{dataset.name}: the remote has a different Seed")
                base = None
            try:
                validate_extension(base, ((b.hash, b.block) for b in blocks))
            except ModelError as exc:
                raise RemoteError(ErrorCode.INVALID_BLOCKS, f"the remote chain is invalid: {exc}") from None
            manifests = await self._manifests(http, remote, blocks)
            refs = objects_of(blocks, manifests)
            local = self.workspace.local_store
            missing = await asyncio.to_thread(dataset.objects_missing, refs)
            moved = 0

            async def fetch(ref: ObjectRef) -> None:
                nonlocal moved
                request = HttpRequest(
                    method="GET", url=self._object_url(remote, ref), headers=self.headers, expires_at=0
                )
                verified = await download(
                    http, request, ref.physical_hash, ref.size, local.temp_path(), self.on_bytes, limiter=self.limiter
                )
                await asyncio.to_thread(local.adopt, dataset.object_key(ref), verified.temp_path)
                moved += verified.size

            await self._parallel(missing, fetch)
            new_tip = await asyncio.to_thread(
                dataset.commit, local_tip.head if local_tip else None, base, blocks, manifests
            )
            await asyncio.to_thread(install_latest, self.workspace.root, dataset, blocks, manifests)
            return local_tip, new_tip, len(blocks), len(missing), moved

    async def _manifests(
        self, http: aiohttp.ClientSession, remote: RemoteDataset, blocks: Sequence[NewBlock]
    ) -> dict[Multihash, CheckpointManifest]:
        """Fetch and check the manifest of every checkpoint the blocks reference (metadata: small)."""
        manifests = {}
        for ref in checkpoint_refs(blocks):
            suffix = "" if self.redirect else "?redirect=false"
            data = await self._get(http, f"{remote.url}/{ref.kind.value}/{ref.physical_hash}{suffix}")
            assert data is not None
            if not ref.physical_hash.matches(data):
                raise RemoteError(ErrorCode.INVALID_BLOCKS, f"checkpoint manifest {ref.physical_hash} is corrupt")
            try:
                manifests[ref.physical_hash] = decode_manifest(data)
            except ModelError as exc:
                raise RemoteError(ErrorCode.INVALID_BLOCKS, f"checkpoint manifest {ref.physical_hash}: {exc}") from None
        return manifests

    async def _walk(
        self, http: aiohttp.ClientSession, remote: RemoteDataset, head: Multihash, stop: Multihash | None
    ) -> list[NewBlock]:
        """Blocks from ``head`` back to (not including) ``stop`` or the Seed, oldest first."""
        blocks: list[NewBlock] = []
        cursor: Multihash | None = head
        while cursor is not None and cursor != stop and len(blocks) < MAX_SIMPLE_WALK:
            data = await self._get(http, f"{remote.url}/blocks/{cursor}")
            assert data is not None
            if not cursor.matches(data):
                raise RemoteError(ErrorCode.INVALID_BLOCKS, f"block {cursor} does not match its hash")
            try:
                item = NewBlock.decode(data)
            except ModelError as exc:
                raise RemoteError(ErrorCode.INVALID_BLOCKS, f"block {cursor} is malformed: {exc}") from None
            blocks.append(item)
            cursor = item.block.prev_block_hash
        blocks.reverse()
        return blocks

    # -- push --------------------------------------------------------------------------------------

    async def push(
        self, dataset: DatasetRepository, remote: RemoteDataset
    ) -> tuple[Multihash | None, Multihash, int, int, int, int]:
        """Returns (old remote head, new head, blocks, objects moved, objects skipped, bytes moved)."""
        tip = await asyncio.to_thread(dataset.require_tip)
        async with make_session(self.parallel) as http:
            head = await self.remote_head(http, remote)
            if head == tip.head:
                return head, tip.head, 0, 0, 0, 0
            if head is not None and await asyncio.to_thread(dataset.sequence_of, head) is None:
                raise RemoteError(
                    ErrorCode.INVALID_HEAD,
                    f"{dataset.name}: the remote has blocks the local dataset does not; pull first "
                    "(forced pushes need the smart protocol)",
                )
            blocks = [
                NewBlock.decode(d) for _, d in await asyncio.to_thread(lambda: list(dataset.blocks_after(tip, head)))
            ]
            manifests = {r.physical_hash: dataset.read_manifest(r) for r in checkpoint_refs(blocks)}
            refs = objects_of(blocks, manifests)
            local = self.workspace.local_store
            moved = skipped = uploaded = 0

            async def send_object(ref: ObjectRef) -> None:
                nonlocal moved, skipped, uploaded
                url = f"{remote.url}/{ref.kind.value}/{ref.physical_hash}"
                async with http.head(url, headers=self.headers, allow_redirects=False) as response:
                    if response.status in (200, 307):
                        skipped += 1
                        return
                request = HttpRequest(method="PUT", url=url, headers=self.headers, expires_at=0)
                path = local.path_of(dataset.object_key(ref))
                size = await upload(http, request, str(ref.physical_hash), path, self.on_bytes, limiter=self.limiter)
                moved += size
                uploaded += 1

            async def send_block(item: NewBlock) -> None:
                url = f"{remote.url}/blocks/{item.hash}"
                async with http.put(url, data=item.data, headers=self.headers) as response:
                    if response.status != 201:
                        raise _status_error(url, response.status, await response.read())

            await self._parallel(refs, send_object)
            await self._parallel(blocks, send_block)
            precondition = {"If-Match": f'"{head}"'} if head is not None else {"If-None-Match": "*"}
            url = f"{remote.url}/refs/head"
            async with http.put(url, data=str(tip.head), headers={**self.headers, **precondition}) as response:
                if response.status != 200:
                    raise _status_error(url, response.status, await response.read())
            return head, tip.head, len(blocks), uploaded, skipped, moved
