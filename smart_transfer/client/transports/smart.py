"""The smart transport: one WebSocket session per operation (metadata, URL negotiation, keep-alives)
and presigned URLs that move object bytes directly between this process and storage."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from smart_transfer.client.options import ClientOptions
from smart_transfer.client.remote import RemoteDataset
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
from smart_transfer.client.transports.websocket import ClientSession
from smart_transfer.errors import LocalError, SmartTransferError, from_protocol
from smart_transfer.model import Multihash
from smart_transfer.model.multihash import hash_text
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import ProtocolError
from smart_transfer.protocol.messages import (
    DatasetPullComplete,
    DatasetPullFollow,
    DatasetPullHeadMoved,
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
    HttpUpload,
    MetadataTarball,
    MultipartUpload,
    NotHeld,
    ObjectFile,
    PushObjectTransfer,
    SkipUpload,
    TransferPlan,
)
from smart_transfer.sync.bundle import Bundle, bundle_from_tarball
from smart_transfer.transfer.errors import TransferFailed
from smart_transfer.transfer.mover import Transfer


def _how(transfer: SkipUpload | HttpUpload | MultipartUpload | NotHeld) -> Transfer | None:
    if isinstance(transfer, HttpUpload):
        return transfer.request
    if isinstance(transfer, NotHeld):  # the answer to a question, never to an offer with MD5s
        raise LocalError(ErrorCode.BAD_MESSAGE, "the server answered NotHeld to an upload offer")
    return transfer if isinstance(transfer, MultipartUpload) else None


def _lacking(answer: PushObjectTransfer) -> Lacking | None:
    if isinstance(answer.transfer, NotHeld):
        return Lacking(answer.object_file, answer.transfer.stored)
    if isinstance(answer.transfer, SkipUpload):
        return None
    raise LocalError(ErrorCode.BAD_MESSAGE, "the server offered an upload for an object only asked about")


def _same_objects(asked: Sequence[ObjectFile], answered: list[ObjectFile]) -> None:
    if answered != list(asked):
        raise LocalError(ErrorCode.BAD_MESSAGE, "the server answered for other objects than requested")


class SmartPull(PullChannel):
    """A pull in one WebSocket session: the plan, the tarball, pages of presigned GETs, and follow."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session
        self._metadata_received = False

    async def _metadata(self) -> bytes:
        self._metadata_received = True
        return (await self.session.request(DatasetPullMetadataRequest(), MetadataTarball)).data

    async def start(self, local: LocalChain, force: bool, announce: str | None = None) -> PullStart:
        self._metadata_received = False
        request = DatasetPullRequest(
            begin_after=hash_text(local.head),
            force_update_if_diverged=force,
            known_blocks=[str(h) for h in local.known],
            announce=announce,
        )
        answer = await self.session.request(request, DatasetPullResponse)
        bundle = Bundle()
        if answer.transfer_plan.num_blocks > 0:
            try:
                bundle = bundle_from_tarball(await self._metadata(), held=local.pages)
            except ProtocolError as exc:
                raise from_protocol(exc, remote=False, context="the server sent invalid metadata: ") from None
        begin_after = Multihash.parse(answer.begin_after) if answer.begin_after else None
        head = Multihash.parse(answer.head)
        return PullStart(head, begin_after, bundle, answer.max_objects_per_page, list(answer.peers))

    async def urls(self, page: Sequence[ObjectFile]) -> Urls:
        if not self._metadata_received:
            await self._metadata()  # nothing new, but objects to repair: the session moves on to transfers
        request = DatasetPullObjectsTransferRequest(object_files=list(page))
        answer = await self.session.request(request, DatasetPullObjectsTransferResponse)
        _same_objects(page, [t.object_file for t in answer.object_transfers])
        return [(t.object_file, t.download) for t in answer.object_transfers]

    async def keep_alive(self, objects_done: int, bytes_done: int) -> None:
        await self.session.keep_alive(objects_done, bytes_done)

    async def finish(self) -> None:
        async with self.session.lock:
            await self.session.send(DatasetPullComplete())

    async def follow(self, stop: asyncio.Event, keepalive_interval: float) -> Multihash | None:
        async with self.session.lock:
            await self.session.send(DatasetPullFollow())
        # not under the lock: keep-alives go out while the answer is awaited
        moving = asyncio.create_task(self.session.expect(DatasetPullHeadMoved))
        stopping = asyncio.create_task(stop.wait())
        try:
            while True:
                done, _ = await asyncio.wait(
                    {moving, stopping}, timeout=keepalive_interval, return_when=asyncio.FIRST_COMPLETED
                )
                if moving in done:
                    return Multihash.parse(moving.result().head)
                if stopping in done:
                    break
                await self.session.keep_alive(0, 0)
            moving.cancel()  # receiving is cancel-safe; a HeadMoved crossing our end is answered the same
            await asyncio.gather(moving, return_exceptions=True)
            await self.finish()
            return None
        finally:
            for task in (moving, stopping):
                task.cancel()
            await asyncio.gather(moving, stopping, return_exceptions=True)


class SmartPush(PushChannel):
    """A push in one WebSocket session: the request, the tarball, pages of upload terms, the commit."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def start(self, local: LocalChain, expected: Multihash | None, plan: TransferPlan, force: bool) -> PushStart:
        request = DatasetPushRequest(
            current_head=hash_text(expected),
            transfer_plan=plan,
            force_update_if_diverged=force,
            known_blocks=[str(h) for h in local.known],
            target_head=hash_text(local.head),
        )
        accepted = await self.session.request(request, DatasetPushRequestAccepted)
        current = Multihash.parse(accepted.current_head) if accepted.current_head else None
        common = Multihash.parse(accepted.common_block) if accepted.common_block else None
        return PushStart(current, common)

    async def send_blocks(self, bundle: Bundle) -> UploadTerms:
        answer = await self.session.request(MetadataTarball(bundle.tarball()), DatasetPushMetadataAccepted)
        return UploadTerms(answer.max_objects_per_page, answer.multipart_threshold, answer.part_size)

    async def _negotiate(self, page: Sequence[ObjectFile]) -> list[PushObjectTransfer]:
        request = DatasetPushObjectsTransferRequest(object_files=list(page))
        answer = await self.session.request(request, DatasetPushObjectsTransferResponse)
        _same_objects(page, [t.object_file for t in answer.object_transfers])
        return answer.object_transfers

    async def urls(self, page: Sequence[ObjectFile]) -> Urls:
        return [(t.object_file, _how(t.transfer)) for t in await self._negotiate(page)]

    async def lacking(self, page: Sequence[ObjectFile]) -> list[Lacking]:
        # the same negotiation, its offers without MD5s: the server answers SkipUpload or NotHeld
        answers = [_lacking(t) for t in await self._negotiate(page)]
        return [lack for lack in answers if lack is not None]

    async def keep_alive(self, objects_done: int, bytes_done: int) -> None:
        await self.session.keep_alive(objects_done, bytes_done)

    async def finish(self, new_head: Multihash) -> Multihash:
        confirmed = await self.session.request(DatasetPushComplete(), DatasetPushCompleteConfirmed)
        if confirmed.new_head != str(new_head):
            raise LocalError(ErrorCode.BAD_MESSAGE, f"the server committed {confirmed.new_head}, not {new_head}")
        return new_head


class SmartTransport(Transport):
    """Pull and push over the Smart Transfer Protocol."""

    name = "smart"

    def __init__(self, token: str | None = None, options: ClientOptions | None = None) -> None:
        """``options``: the answer and connect timeouts of the session (see ``ClientOptions``)."""
        self.token = token
        self.options = options or ClientOptions()

    @asynccontextmanager
    async def _session(self, remote: RemoteDataset, flow: str) -> AsyncIterator[ClientSession]:
        session = await ClientSession.open(
            remote.ws_url(flow),
            flow,
            self.token,
            answer_timeout=self.options.answer_timeout,
            connect_timeout=self.options.connect_timeout,
        )
        try:
            yield session
        except SmartTransferError as exc:
            await session.fail(exc)  # says why to a server still listening (a no-op after its own Error)
            raise
        except TransferFailed as exc:
            code = ErrorCode.UNREACHABLE if exc.network or exc.stalled else ErrorCode.INTERNAL
            await session.fail(LocalError(code, f"object transfer failed: {exc}"))
            raise
        except BaseException:
            await session.fail(LocalError(ErrorCode.INTERNAL, "the client stopped"))
            raise
        await session.close()

    @asynccontextmanager
    async def pull(self, remote: RemoteDataset) -> AsyncIterator[PullChannel]:
        async with self._session(remote, "pull") as session:
            yield SmartPull(session)

    @asynccontextmanager
    async def push(self, remote: RemoteDataset) -> AsyncIterator[PushChannel]:
        async with self._session(remote, "push") as session:
            yield SmartPush(session)
