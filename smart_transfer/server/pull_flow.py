"""The server side of a pull: plan (sync.plan) and list live peers, send the metadata tarball, hand out
presigned GETs page by page until the client says it is complete; record its peer announcement; and
for a follower, wait for the head to move (server/follow.py) and serve the increment the same way."""

from __future__ import annotations

import asyncio
import time
from typing import cast

from smart_transfer.model import Multihash
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import ProtocolError, TooManyObjectsDetails
from smart_transfer.protocol.messages import (
    DatasetPullComplete,
    DatasetPullFollow,
    DatasetPullMetadataRequest,
    DatasetPullObjectsTransferRequest,
    DatasetPullObjectsTransferResponse,
    DatasetPullRequest,
    DatasetPullResponse,
    HttpRequest,
    MetadataTarball,
    ObjectFile,
    PeerSource,
    PullObjectTransfer,
    TransferPlan,
)
from smart_transfer.protocol.tarball import pack_blocks
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.server.follow import follow
from smart_transfer.server.session import ServerSession
from smart_transfer.server.settings import ServerSettings
from smart_transfer.server.state import ServerState
from smart_transfer.sync.plan import PullPlan, plan_pull


def check_page(items: list[ObjectFile], settings: ServerSettings) -> None:
    if len(items) > settings.max_objects_per_page:
        raise ProtocolError(
            ErrorCode.TOO_MANY_OBJECTS,
            f"{len(items)} objects in one page; at most {settings.max_objects_per_page}",
            TooManyObjectsDetails(max_objects_per_page=settings.max_objects_per_page),
        )


def _plan(dataset: DatasetRepository, request: DatasetPullRequest) -> PullPlan:
    return plan_pull(
        dataset,
        Multihash.parse(request.begin_after) if request.begin_after else None,
        Multihash.parse(request.stop_at) if request.stop_at else None,
        request.force_update_if_diverged,
        [Multihash.parse(h) for h in request.known_blocks],
    )


async def run_pull(session: ServerSession, dataset: DatasetRepository, server: ServerState) -> None:
    """Drive one pull session to its end (errors propagate to the caller, which reports them). A client
    that follows (DatasetPullFollow) is told when the head moves and pulls again in the same session."""
    request: DatasetPullRequest | None = await session.expect(DatasetPullRequest)
    while request is not None:
        plan, peers = await asyncio.to_thread(_plan_and_peers, dataset, request, server)
        await session.send(
            DatasetPullResponse(
                head=str(plan.target.head),
                begin_after=str(plan.begin_after) if plan.begin_after else None,
                transfer_plan=TransferPlan(
                    num_blocks=len(plan.blocks), num_objects=len(plan.objects), bytes_in_objects=plan.object_bytes
                ),
                max_objects_per_page=server.settings.max_objects_per_page,
                peers=peers,
            )
        )
        ending = await _serve_plan(session, dataset, server, plan)
        head = plan.target.head
        announce = request.announce
        if announce is not None:
            await _announce(server, dataset, announce, head, session)
        if isinstance(ending, DatasetPullComplete):
            break

        renewed = time.monotonic()

        async def tick(announce: str | None = announce, head: Multihash = head) -> None:
            nonlocal renewed
            server.refuse_if_draining()  # a follower has nothing in flight: it ends at once
            if session.grant is not None:
                session.grant.refuse_if_expired()  # a follower outlives its admission: it ends with its token
            if announce is not None and time.monotonic() - renewed >= server.settings.peer_ttl_seconds / 4:
                renewed = time.monotonic()
                await _announce(server, dataset, announce, head, session)  # alive: still serving

        interval = server.settings.keepalive_interval_seconds
        session.followed = True
        request = await follow(session, server.heads, dataset, head, interval, tick)
        if request is not None:
            server.metrics.follow_updates.inc()
    await session.close()


def _plan_and_peers(
    dataset: DatasetRepository, request: DatasetPullRequest, server: ServerState
) -> tuple[PullPlan, list[PeerSource]]:
    return _plan(dataset, request), server.peers.listed(dataset, exclude=request.announce)


async def _announce(
    server: ServerState, dataset: DatasetRepository, url: str, head: Multihash, session: ServerSession
) -> None:
    """Record the session's announcement, listed no longer than the announcing token works."""
    expires = session.grant.expires_at if session.grant is not None else None
    until = expires.timestamp() if expires is not None else None
    await asyncio.to_thread(server.peers.announce, dataset, url, head, session.subject, until)
    server.metrics.announcements.inc()


async def _serve_plan(
    session: ServerSession, dataset: DatasetRepository, server: ServerState, plan: PullPlan
) -> DatasetPullComplete | DatasetPullFollow:
    """Send the metadata and hand out URLs page by page until the client has everything."""
    ends = (DatasetPullComplete, DatasetPullFollow)
    message = await session.expect(DatasetPullMetadataRequest, *ends)
    if isinstance(message, DatasetPullMetadataRequest):
        tarball = await asyncio.to_thread(pack_blocks, plan.blocks, plan.manifests.items())
        await session.send(MetadataTarball(tarball))
        while isinstance(
            message := await session.expect(DatasetPullObjectsTransferRequest, *ends), DatasetPullObjectsTransferRequest
        ):
            check_page(message.object_files, server.settings)
            transfers = await asyncio.to_thread(_presign_downloads, dataset, message.object_files, server)
            await session.send(DatasetPullObjectsTransferResponse(object_transfers=transfers))
    # expect() let nothing else through: the loop ends on one of the messages that end a plan
    return cast("DatasetPullComplete | DatasetPullFollow", message)


def _presign_downloads(
    dataset: DatasetRepository, items: list[ObjectFile], server: ServerState
) -> list[PullObjectTransfer]:
    """A GET per object of the page: the signer refuses any the dataset does not hold committed."""
    ttl = server.settings.url_ttl_seconds
    signed = [(item, server.signer.get(dataset, item.ref(), ttl)) for item in items]
    return [PullObjectTransfer(object_file=item, download=HttpRequest.presigned(url)) for item, url in signed]
