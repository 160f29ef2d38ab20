"""The SDK: an async ``Client`` that pulls and pushes datasets between a Workspace and a server.

Metadata travels in one WebSocket session per operation; object bytes go directly between this
process and storage through presigned URLs. Nothing becomes visible locally until every object is
verified (hash and size) and the local head moves by compare-and-swap; a re-run resumes, skipping
every object already present.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import hashlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from smart_transfer.checkpoint.manifest import CheckpointManifest, decode_manifest
from smart_transfer.checkpoint.slot import install_latest
from smart_transfer.client.mover import MoveResult, ObjectMover
from smart_transfer.client.remote import RemoteDataset
from smart_transfer.client.session import ClientSession, RemoteError
from smart_transfer.client.simple import SimpleProtocol
from smart_transfer.model import ChainTip, ModelError, Multihash, validate_extension
from smart_transfer.model.events import Seed
from smart_transfer.protocol.errors import ErrorCode, ProtocolError
from smart_transfer.protocol.messages import (
    DatasetPullComplete,
    DatasetPullMetadataRequest,
    DatasetPullObjectsTransferRequest,
    DatasetPullObjectsTransferResponse,
    DatasetPullRequest,
    DatasetPullResponse,
    DatasetPushComplete,
    DatasetPushCompleteConfirmed,
    DatasetPushMetadataAccepted,
    DatasetPushObjectsTransferRequest,
    DatasetPushObjectsTransferResponse,
    DatasetPushRequest,
    DatasetPushRequestAccepted,
    HttpRequest,
    HttpUpload,
    MetadataTarball,
    ObjectFile,
    Progress,
    TransferPlan,
)
from smart_transfer.protocol.tarball import pack_blocks, unpack_blocks
from smart_transfer.repo import RepositoryError, Workspace
from smart_transfer.repo.dataset import DatasetRepository, NewBlock, ObjectRef, checkpoint_refs, objects_of
from smart_transfer.repo.layout import ObjectKind
from smart_transfer.storage.base import STREAM_CHUNK_BYTES
from smart_transfer.transfer.http import DEFAULT_PARALLEL, TransferFailed, download, make_session, upload
from smart_transfer.transfer.ratelimit import RateLimiter

log = logging.getLogger("smart_transfer.client")
#: The two ways to talk to a server.
PROTOCOLS = ("smart", "simple")
#: Objects per negotiation page the client asks for (the server may allow fewer; 1000 by default).
DEFAULT_PAGE_SIZE = 1000
#: Attempts when the server says it is busy, and the longest wait between them (seconds).
BUSY_ATTEMPTS = 6
MAX_BUSY_DELAY = 30.0
#: Seconds between Progress keep-alives during transfers.
PROGRESS_INTERVAL = 5.0


@dataclass
class TransferSummary:
    """What one pull or push did (the CLI's ``--json`` output)."""

    operation: str
    dataset: str
    remote: str
    old_head: str | None
    new_head: str | None
    blocks: int = 0
    objects_transferred: int = 0
    objects_skipped: int = 0
    bytes_transferred: int = 0
    urls_refreshed: int = 0
    objects_repaired: int = 0
    seconds: float = 0.0
    up_to_date: bool = False
    protocol: str = "smart"
    note: str | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class ProgressUpdate:
    """Where a transfer stands; passed to the ``progress`` callback."""

    operation: str
    objects_done: int
    objects_total: int
    bytes_done: int
    bytes_total: int


ProgressCallback = Callable[[ProgressUpdate], None]


class DivergedError(Exception):
    """Local and remote histories differ; ``force`` would replace one with the other."""


def _object_file(ref: ObjectRef, md5: str | None = None) -> ObjectFile:
    return ObjectFile(kind=ref.kind.value, physical_hash=str(ref.physical_hash), size=ref.size, md5=md5)


def _md5_base64(path: str) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as src:
        while chunk := src.read(STREAM_CHUNK_BYTES):
            digest.update(chunk)
    return base64.b64encode(digest.digest()).decode()


class _Meter:
    """Counts progress and reports it to the callback and, as keep-alives, to the server."""

    def __init__(self, operation: str, objects_total: int, bytes_total: int, callback: ProgressCallback | None):
        self.operation = operation
        self.objects_total = objects_total
        self.bytes_total = bytes_total
        self.objects_done = 0
        self.bytes_done = 0
        self.callback = callback

    def add_bytes(self, count: int) -> None:
        self.bytes_done += count
        self._report()

    def add_object(self) -> None:
        self.objects_done += 1
        self._report()

    def _report(self) -> None:
        if self.callback is not None:
            self.callback(
                ProgressUpdate(self.operation, self.objects_done, self.objects_total, self.bytes_done, self.bytes_total)
            )

    async def keep_alive(self, session: ClientSession) -> None:
        while True:
            await asyncio.sleep(PROGRESS_INTERVAL)
            async with session.lock:
                await session.send(Progress(objects_done=self.objects_done, bytes_done=self.bytes_done))


class Client:
    """Pulls and pushes datasets between ``workspace`` and smart-transfer servers."""

    def __init__(
        self,
        workspace: Workspace,
        *,
        token: str | None = None,
        parallel: int = DEFAULT_PARALLEL,
        page_size: int = DEFAULT_PAGE_SIZE,
        progress: ProgressCallback | None = None,
        limit_rate: int | None = None,
        protocol: str = "smart",
        fallback: bool = True,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}")
        self.workspace = workspace
        self.limiter = RateLimiter(limit_rate) if limit_rate else None
        self.protocol = protocol
        self.fallback = fallback
        self.warn = warn or log.warning
        self.token = token
        self.parallel = parallel
        self.page_size = page_size
        self.progress = progress

    # -- pull ------------------------------------------------------------------------------------

    async def pull(self, url: str, as_name: str | None = None, force: bool = False) -> TransferSummary:
        """Bring the local dataset up to the remote head. Raises RemoteError, DivergedError,
        TransferFailed; on any failure the local head is unchanged. When direct storage transfers
        fail for network reasons, falls back (with a warning) to the simple protocol through the
        server, unless ``fallback=False``."""
        return await self._run(
            lambda: self._pull_smart(url, as_name, force),
            lambda redirect: self._pull_simple(url, as_name, force, redirect=redirect),
        )

    async def _pull_simple(self, url: str, as_name: str | None, force: bool, redirect: bool) -> TransferSummary:
        started = time.monotonic()
        remote = RemoteDataset.parse(url)
        dataset = self.workspace.dataset(as_name or remote.name)
        simple = self._simple(redirect)
        old, new, blocks, moved_objects, moved_bytes = await simple.pull(dataset, remote, force)
        old_head = str(old.head) if old else None
        new_head = str(new.head) if new else None
        summary = TransferSummary("pull", dataset.name, remote.url, old_head, new_head, protocol="simple")
        summary.blocks, summary.objects_transferred, summary.bytes_transferred = blocks, moved_objects, moved_bytes
        summary.up_to_date = blocks == 0
        if new is not None:
            await asyncio.to_thread(self._track, dataset, remote, str(new.head))
        return self._finish(summary, started)

    def _simple(self, redirect: bool) -> SimpleProtocol:
        return SimpleProtocol(
            self.workspace, token=self.token, parallel=self.parallel, limiter=self.limiter, redirect=redirect
        )

    async def _pull_smart(self, url: str, as_name: str | None, force: bool) -> TransferSummary:
        started = time.monotonic()
        remote = RemoteDataset.parse(url)
        dataset = self.workspace.dataset(as_name or remote.name)
        local_tip = await asyncio.to_thread(dataset.tip)
        local_head = str(local_tip.head) if local_tip is not None else None
        summary = TransferSummary("pull", dataset.name, remote.url, local_head, local_head)
        session = await ClientSession.open(remote.ws_url("pull"), "pull", self.token)
        try:
            try:
                answer = await session.request(
                    DatasetPullRequest(begin_after=local_head, force_update_if_diverged=force)
                )
            except RemoteError as exc:
                if exc.code is ErrorCode.DIVERGED and await self._local_is_ahead(dataset, exc.details):
                    summary.up_to_date = True
                    summary.note = "the local dataset is ahead of the remote; nothing to pull (push it instead)"
                    return self._finish(summary, started)
                if exc.code is ErrorCode.DIVERGED:
                    raise DivergedError(
                        f"{dataset.name}: local and remote histories diverged; pull --force replaces the local one"
                    ) from None
                raise
            assert isinstance(answer, DatasetPullResponse)
            # objects of the chain we already have that are missing locally (e.g. quarantined by
            # verify) are fetched again in the same session
            repairs = await asyncio.to_thread(self._chain_repairs, dataset, local_tip)
            if answer.transfer_plan.num_blocks == 0 and not repairs:
                await session.send(DatasetPullComplete())
                summary.up_to_date = True
                await asyncio.to_thread(self._track, dataset, remote, answer.head)
                return self._finish(summary, started)
            tarball = await session.request(DatasetPullMetadataRequest())
            assert isinstance(tarball, MetadataTarball)
            blocks, manifests = await asyncio.to_thread(_decode_tarball, tarball.data)
            base = self._pull_base(dataset, local_tip, answer, blocks)
            refs = objects_of(blocks, manifests)
            # blocks are invisible until head moves: write them while the objects download
            writing_blocks = asyncio.create_task(asyncio.to_thread(dataset.store_blocks, blocks))
            missing = await asyncio.to_thread(dataset.objects_missing, refs)
            summary.objects_skipped = len(refs) - len(missing)
            known = {(r.kind, r.physical_hash) for r in missing}
            missing += [r for r in repairs if (r.kind, r.physical_hash) not in known]
            summary.objects_repaired = len(repairs)
            meter = _Meter("pull", len(missing), sum(r.size for r in missing), self.progress)
            try:
                result = await self._move_pull(session, dataset, missing, meter, answer.max_objects_per_page)
            finally:
                await writing_blocks
            summary.objects_transferred = result.transferred
            summary.bytes_transferred = result.bytes
            summary.urls_refreshed = result.refreshed_urls
            if blocks:
                new_tip = await asyncio.to_thread(
                    functools.partial(
                        dataset.commit,
                        local_tip.head if local_tip else None,
                        base,
                        blocks,
                        manifests,
                        blocks_stored=True,
                    )
                )
                await asyncio.to_thread(install_latest, self.workspace.root, dataset, blocks, manifests)
            else:
                assert local_tip is not None
                new_tip = local_tip
            summary.new_head = str(new_tip.head)
            summary.blocks = len(blocks)
            await asyncio.to_thread(self._track, dataset, remote, str(new_tip.head))
            async with session.lock:
                await session.send(DatasetPullComplete())
            return self._finish(summary, started)
        finally:
            await session.close()

    @staticmethod
    def _chain_repairs(dataset: DatasetRepository, tip: ChainTip | None) -> list[ObjectRef]:
        """Objects the local chain references that are not (whole) in the workspace."""
        if tip is None:
            return []
        blocks = [NewBlock.decode(data) for _, data in dataset.blocks_after(tip, None)]
        manifests = {}
        for ref in checkpoint_refs(blocks):
            if not dataset.objects_missing([ref]):
                with contextlib.suppress(RepositoryError):
                    manifests[ref.physical_hash] = dataset.read_manifest(ref)
        return dataset.objects_missing(objects_of(blocks, manifests))

    async def _local_is_ahead(self, dataset: DatasetRepository, details: dict[str, object]) -> bool:
        remote_head = details.get("remote_head")
        if not isinstance(remote_head, str):
            return False
        try:
            return await asyncio.to_thread(dataset.sequence_of, Multihash.parse(remote_head)) is not None
        except ModelError:
            return False

    @staticmethod
    def _pull_base(
        dataset: DatasetRepository, local_tip: ChainTip | None, answer: DatasetPullResponse, blocks: list[NewBlock]
    ) -> ChainTip | None:
        if answer.begin_after is None:
            base = None
            first = blocks[0].block.event if blocks else None
            if local_tip is not None and (not isinstance(first, Seed) or first.dataset_id != local_tip.dataset_id):
                raise RemoteError(
                    ErrorCode.SEED_MISMATCH,
                    f"{dataset.name}: the remote dataset has a different Seed; it never replaces the local one",
                )
        else:
            if local_tip is None or answer.begin_after != str(local_tip.head):
                raise RemoteError(ErrorCode.INVALID_BLOCKS, "the server sent blocks after a head we do not have")
            base = local_tip
        try:
            validate_extension(base, ((b.hash, b.block) for b in blocks))
        except ModelError as exc:
            raise RemoteError(ErrorCode.INVALID_BLOCKS, f"the remote chain is invalid: {exc}") from None
        if blocks and str(blocks[-1].hash) != answer.head:
            raise RemoteError(ErrorCode.INVALID_BLOCKS, "the blocks received do not end at the announced head")
        return base

    async def _move_pull(
        self,
        session: ClientSession,
        dataset: DatasetRepository,
        refs: list[ObjectRef],
        meter: _Meter,
        server_page_limit: int,
    ) -> MoveResult:
        local = self.workspace.local_store
        by_hash = {str(r.physical_hash): r for r in refs}

        async def negotiate(page: Sequence[ObjectFile]) -> list[tuple[ObjectFile, HttpRequest | None]]:
            answer = await session.request(DatasetPullObjectsTransferRequest(object_files=list(page)))
            assert isinstance(answer, DatasetPullObjectsTransferResponse)
            if [t.object_file for t in answer.object_transfers] != list(page):
                raise RemoteError(ErrorCode.BAD_MESSAGE, "the server answered for other objects than requested")
            return [(t.object_file, t.download) for t in answer.object_transfers]

        async with make_session(self.parallel) as http:

            async def work(item: ObjectFile, request: HttpRequest) -> int:
                ref = by_hash[item.physical_hash]
                verified = await download(
                    http, request, ref.physical_hash, ref.size, local.temp_path(), meter.add_bytes, limiter=self.limiter
                )
                await asyncio.to_thread(local.adopt, dataset.object_key(ref), verified.temp_path)
                meter.add_object()
                return verified.size

            page_size = min(self.page_size, server_page_limit)
            mover = ObjectMover(negotiate, work, parallel=self.parallel, page_size=page_size)
            return await self._with_keep_alive(session, meter, mover.move([_object_file(r) for r in refs]))

    async def _with_keep_alive(
        self, session: ClientSession, meter: _Meter, moving: Coroutine[Any, Any, MoveResult]
    ) -> MoveResult:
        keep_alive = asyncio.create_task(meter.keep_alive(session))
        try:
            return await moving
        finally:
            keep_alive.cancel()
            with contextlib.suppress(asyncio.CancelledError, RemoteError):
                await keep_alive

    # -- push ------------------------------------------------------------------------------------

    async def push(self, name: str, url: str, force: bool = False) -> TransferSummary:
        """Make the remote dataset's head the local head. Raises RemoteError, DivergedError,
        TransferFailed; on any failure the remote head is unchanged. Falls back to the simple
        protocol like ``pull`` does."""
        return await self._run(
            lambda: self._push_smart(name, url, force),
            lambda redirect: self._push_simple(name, url, redirect=redirect),
        )

    async def _push_simple(self, name: str, url: str, redirect: bool) -> TransferSummary:
        started = time.monotonic()
        remote = RemoteDataset.parse(url)
        dataset = self.workspace.dataset(name)
        old, new, blocks, moved, skipped, moved_bytes = await self._simple(redirect).push(dataset, remote)
        summary = TransferSummary(
            "push", dataset.name, remote.url, str(old) if old else None, str(new), protocol="simple"
        )
        summary.blocks, summary.objects_transferred, summary.objects_skipped = blocks, moved, skipped
        summary.bytes_transferred = moved_bytes
        summary.up_to_date = blocks == 0
        await asyncio.to_thread(self._track, dataset, remote, str(new))
        return self._finish(summary, started)

    async def _push_smart(self, name: str, url: str, force: bool) -> TransferSummary:
        started = time.monotonic()
        remote = RemoteDataset.parse(url)
        dataset = self.workspace.dataset(name)
        tip = await asyncio.to_thread(dataset.require_tip)
        expected = await asyncio.to_thread(self.workspace.index.remote_head, dataset.name, remote.url)
        expected_text = str(expected) if expected is not None else None
        for _ in range(3):
            try:
                return await self._push_once(dataset, tip, remote, expected_text, force, started)
            except RemoteError as exc:
                if exc.code is not ErrorCode.INVALID_HEAD or "actual" not in exc.details:
                    raise
                actual = exc.details.get("actual")
                if actual is not None and not await self._on_local_chain(dataset, str(actual)):
                    raise DivergedError(
                        f"{dataset.name}: the remote has blocks the local dataset does not; "
                        "pull first, or push --force to replace the remote history"
                    ) from None
                if actual == expected_text:
                    raise
                expected_text = str(actual) if actual is not None else None  # our record was stale: retry
        raise DivergedError(f"{dataset.name}: the remote head keeps moving; try again")

    async def _on_local_chain(self, dataset: DatasetRepository, head: str) -> bool:
        try:
            return await asyncio.to_thread(dataset.sequence_of, Multihash.parse(head)) is not None
        except ModelError:
            return False

    async def _push_once(
        self,
        dataset: DatasetRepository,
        tip: ChainTip,
        remote: RemoteDataset,
        expected: str | None,
        force: bool,
        started: float,
    ) -> TransferSummary:
        blocks, manifests = await asyncio.to_thread(self._blocks_to_push, dataset, tip, expected)
        refs = objects_of(blocks, manifests)
        plan = TransferPlan(num_blocks=len(blocks), num_objects=len(refs), bytes_in_objects=sum(r.size for r in refs))
        session = await ClientSession.open(remote.ws_url("push"), "push", self.token)
        try:
            accepted = await session.request(
                DatasetPushRequest(current_head=expected, transfer_plan=plan, force_update_if_diverged=force)
            )
            assert isinstance(accepted, DatasetPushRequestAccepted)
            if accepted.current_head != expected:
                # forced over a head we did not know: send what attaches to it, or the whole chain
                blocks, manifests = await asyncio.to_thread(self._blocks_to_push, dataset, tip, accepted.current_head)
                refs = objects_of(blocks, manifests)
            summary = TransferSummary("push", dataset.name, remote.url, accepted.current_head, accepted.current_head)
            async with session.lock:
                tarball = await asyncio.to_thread(
                    pack_blocks, [(b.hash, b.data) for b in blocks], [(h, m.encode()) for h, m in manifests.items()]
                )
                await session.send_tarball(tarball)
                answer = await session.receive()
            assert isinstance(answer, DatasetPushMetadataAccepted)
            files = await asyncio.to_thread(self._with_md5, dataset, refs)
            meter = _Meter("push", len(files), sum(f.size for f in files), self.progress)
            result = await self._move_push(session, dataset, files, meter, answer.max_objects_per_page)
            confirmed = await session.request(DatasetPushComplete())
            assert isinstance(confirmed, DatasetPushCompleteConfirmed)
            await asyncio.to_thread(self._track, dataset, remote, confirmed.new_head)
            summary.new_head = confirmed.new_head
            summary.blocks = len(blocks)
            summary.objects_transferred = result.transferred
            summary.objects_skipped = result.skipped
            summary.bytes_transferred = result.bytes
            summary.urls_refreshed = result.refreshed_urls
            summary.up_to_date = not blocks
            return self._finish(summary, started)
        finally:
            await session.close()

    @staticmethod
    def _blocks_to_push(
        dataset: DatasetRepository, tip: ChainTip, remote_head: str | None
    ) -> tuple[list[NewBlock], dict[Multihash, CheckpointManifest]]:
        """Local blocks after ``remote_head`` when it is on the local chain (else the whole chain),
        with the manifests of the checkpoints they reference."""
        begin_after = Multihash.parse(remote_head) if remote_head is not None else None
        if begin_after is not None and dataset.sequence_of(begin_after) is None:
            begin_after = None
        blocks = [NewBlock.decode(data) for _, data in dataset.blocks_after(tip, begin_after)]
        return blocks, {ref.physical_hash: dataset.read_manifest(ref) for ref in checkpoint_refs(blocks)}

    def _with_md5(self, dataset: DatasetRepository, refs: list[ObjectRef]) -> list[ObjectFile]:
        local = self.workspace.local_store
        return [_object_file(ref, _md5_base64(str(local.path_of(dataset.object_key(ref))))) for ref in refs]

    async def _move_push(
        self,
        session: ClientSession,
        dataset: DatasetRepository,
        files: list[ObjectFile],
        meter: _Meter,
        server_page_limit: int,
    ) -> MoveResult:
        store = self.workspace.local_store

        async def negotiate(page: Sequence[ObjectFile]) -> list[tuple[ObjectFile, HttpRequest | None]]:
            answer = await session.request(DatasetPushObjectsTransferRequest(object_files=list(page)))
            assert isinstance(answer, DatasetPushObjectsTransferResponse)
            if [t.object_file for t in answer.object_transfers] != list(page):
                raise RemoteError(ErrorCode.BAD_MESSAGE, "the server answered for other objects than requested")
            return [
                (t.object_file, t.transfer.request if isinstance(t.transfer, HttpUpload) else None)
                for t in answer.object_transfers
            ]

        async with make_session(self.parallel) as http:

            async def work(item: ObjectFile, request: HttpRequest) -> int:
                ref = ObjectRef(ObjectKind(item.kind), Multihash.parse(item.physical_hash), item.size)
                path = store.path_of(dataset.object_key(ref))
                size = await upload(http, request, item.physical_hash, path, meter.add_bytes, limiter=self.limiter)
                meter.add_object()
                return size

            page_size = min(self.page_size, server_page_limit)
            mover = ObjectMover(negotiate, work, parallel=self.parallel, page_size=page_size)
            return await self._with_keep_alive(session, meter, mover.move(files))

    # -- shared ----------------------------------------------------------------------------------

    async def _run(
        self,
        smart: Callable[[], Awaitable[TransferSummary]],
        simple: Callable[[bool], Awaitable[TransferSummary]],
    ) -> TransferSummary:
        """The chosen protocol; the smart one waits out Busy answers and, when direct storage transfers
        fail for network reasons, falls back to the simple protocol through the server (no redirects)."""
        if self.protocol == "simple":
            return await simple(True)
        try:
            return await self._when_not_busy(smart)
        except TransferFailed as exc:
            if not (exc.network and self.fallback):
                raise
            self.warn(f"direct storage transfer failed ({exc}); falling back to the simple protocol via the server")
            return await simple(False)

    async def _when_not_busy(self, attempt: Callable[[], Awaitable[TransferSummary]]) -> TransferSummary:
        """Run ``attempt``; when the server answers Busy, wait as it asks (doubling, with jitter) and
        try again, up to BUSY_ATTEMPTS times."""
        for number in range(1, BUSY_ATTEMPTS + 1):
            try:
                return await attempt()
            except RemoteError as exc:
                if exc.code is not ErrorCode.BUSY or number == BUSY_ATTEMPTS:
                    raise
                hint = exc.details.get("retry_after", 1)
                base = float(hint) if isinstance(hint, int | float) else 1.0
                delay = min(MAX_BUSY_DELAY, base * 2 ** (number - 1)) * random.uniform(0.5, 1.5)
                self.warn(f"server busy; retrying in {delay:.1f} s")
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    def _track(self, dataset: DatasetRepository, remote: RemoteDataset, head: str) -> None:
        self.workspace.index.set_remote_head(dataset.name, remote.url, Multihash.parse(head))

    @staticmethod
    def _finish(summary: TransferSummary, started: float) -> TransferSummary:
        summary.seconds = round(time.monotonic() - started, 3)
        return summary


def _decode_tarball(data: bytes) -> tuple[list[NewBlock], dict[Multihash, CheckpointManifest]]:
    try:
        bundle = unpack_blocks(data)
        blocks = [NewBlock.decode(content) for _, content in bundle.blocks]
        manifests = {h: decode_manifest(content) for h, content in bundle.manifests.items()}
    except ProtocolError as exc:
        raise RemoteError(exc.code, f"the server sent invalid metadata: {exc.message}") from None
    except ModelError as exc:
        raise RemoteError(ErrorCode.INVALID_BLOCKS, f"the server sent an invalid block or manifest: {exc}") from None
    for ref in checkpoint_refs(blocks):
        if ref.physical_hash not in manifests or len(bundle.manifests[ref.physical_hash]) != ref.size:
            raise RemoteError(
                ErrorCode.INVALID_BLOCKS, f"the server did not send checkpoint manifest {ref.physical_hash}"
            )
    return blocks, manifests


__all__ = ["Client", "DivergedError", "ProgressUpdate", "RemoteError", "TransferSummary"]
