"""What a pull or push needs from a server, whatever the protocol: the one pull flow and the one push
flow (``pull.py``, ``push.py``) run over a ``Transport``. The smart transport holds one WebSocket
session and hands out presigned storage URLs; the simple one speaks REST, one request per block."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from msgspec import Struct, field

from smart_transfer.client.remote import RemoteDataset
from smart_transfer.errors import FollowUnsupported
from smart_transfer.model import ChainTip, Multihash
from smart_transfer.model.manifest import PageSource, no_pages
from smart_transfer.protocol.messages import ObjectFile, PeerSource, TransferPlan
from smart_transfer.sync.bundle import Bundle
from smart_transfer.transfer.limits import Timeouts
from smart_transfer.transfer.mover import Transfer
from smart_transfer.transfer.ratelimit import RateLimiter

if TYPE_CHECKING:
    from smart_transfer.transfer.transport import ObjectTransport

#: Per object of a page: how it moves (one request, or a multipart upload), or None when nothing
#: needs to move (skip).
Urls = list[tuple[ObjectFile, Transfer | None]]


class LocalChain(Struct, frozen=True):
    """What a transport may learn of the local chain: its tip, blocks offered as known (newest
    first), a membership test (index lookups: cheap) and the manifest pages it holds."""

    tip: ChainTip | None
    known: list[Multihash]
    contains: Callable[[Multihash], bool]
    #: The checkpoint manifest pages the workspace holds (a pull's tarball leaves them out).
    pages: PageSource = no_pages

    @property
    def head(self) -> Multihash | None:
        """The local head (None: the dataset has no block yet)."""
        return self.tip.head if self.tip is not None else None


class PullStart(Struct, frozen=True):
    """What the remote sends: the head it pulls up to, where its blocks attach (None: from the Seed),
    the checked bundle, the most objects one URL request may name, and the live peers it knows."""

    head: Multihash
    begin_after: Multihash | None
    bundle: Bundle
    page_limit: int
    peers: list[PeerSource] = field(default_factory=list)


class UploadTerms(Struct, frozen=True):
    """What the remote takes once it accepted the blocks: the most objects one URL request may name,
    and which objects go in parts (larger than ``multipart_threshold``, cut at ``part_size``; None:
    every object in one request)."""

    page_limit: int
    multipart_threshold: int | None = None
    part_size: int = 0


class Lacking(Struct, frozen=True):
    """An object the remote does not hold committed, and whether its store holds a copy that no
    committed block references (an interrupted push's; False when the protocol cannot tell)."""

    item: ObjectFile
    stored: bool = False


class PushStart(Struct, frozen=True):
    """The remote's head, and the last block both chains share (None: none, or no dataset)."""

    current_head: Multihash | None
    common_block: Multihash | None


class ObjectRoute:
    """Where a channel's object bytes go, and over which transport: every channel provides the
    transport its objects move over, so no HTTP session crosses from a channel into the choice of one."""

    def object_transport(
        self, parallel: int, timeouts: Timeouts, limiter: RateLimiter | None
    ) -> AbstractAsyncContextManager[ObjectTransport]:
        """The transport of one move of objects, closed when the context ends: by default storage's, to
        presigned URLs (``transfer.choice.open_transport``), with at most ``parallel`` connections."""
        # loads once objects move: a metadata-only pull or push never does
        from smart_transfer.transfer.choice import open_transport

        return open_transport(parallel, timeouts, limiter)


class PullChannel(ObjectRoute, ABC):
    """One pull against one remote dataset."""

    @abstractmethod
    async def start(self, local: LocalChain, force: bool, announce: str | None = None) -> PullStart:
        """Ask for everything after the local head (or the last common block when forced); ``announce``:
        the URL where this workspace serves the dataset's objects once the pull is complete."""

    @abstractmethod
    async def urls(self, page: Sequence[ObjectFile]) -> Urls:
        """Download requests for one page of objects."""

    async def keep_alive(self, objects_done: int, bytes_done: int) -> None:
        """Tell the remote the transfer is alive (sessions that have idle timeouts)."""

    async def finish(self) -> None:
        """Everything arrived and is committed locally."""

    async def follow(self, stop: asyncio.Event, keepalive_interval: float) -> Multihash | None:
        """Everything arrived and is committed locally: wait in the same session until the remote head
        moves (its new head; then ``start`` pulls the increment) or ``stop`` is set (None: the session
        ended). Only the smart protocol can: any other refuses with FollowUnsupported."""
        raise FollowUnsupported()


class PushChannel(ObjectRoute, ABC):
    """One push to one remote dataset."""

    @abstractmethod
    async def start(self, local: LocalChain, expected: Multihash | None, plan: TransferPlan, force: bool) -> PushStart:
        """Check the remote head is ``expected`` (unless forced) and learn the last common block."""

    @abstractmethod
    async def send_blocks(self, bundle: Bundle) -> UploadTerms:
        """Send the new blocks (and manifests); returns how the remote takes the objects. The remote
        stores them once an upload is negotiated (``urls``) or at ``finish``: a push that ends after
        ``lacking`` leaves nothing there."""

    @abstractmethod
    async def urls(self, page: Sequence[ObjectFile]) -> Urls:
        """Upload requests for one page of objects (None: the remote has it)."""

    @abstractmethod
    async def lacking(self, page: Sequence[ObjectFile]) -> list[Lacking]:
        """Of one page of objects (offered without MD5s), those the remote does not hold committed, in
        page order. Asking changes nothing on the remote: no upload started, no URL signed."""

    async def keep_alive(self, objects_done: int, bytes_done: int) -> None:
        """Tell the remote the transfer is alive."""

    @abstractmethod
    async def finish(self, new_head: Multihash) -> Multihash:
        """Have the remote verify everything and move its head; returns the new remote head."""


class Transport(ABC):
    """A way to reach a server."""

    #: "smart" or "simple" (reported in summaries).
    name: str

    def object_timeouts(self, timeouts: Timeouts, upload: bool) -> Timeouts:
        """The bounds of object transfers over this transport, uploads or downloads (storage's own,
        by default)."""
        return timeouts

    @abstractmethod
    def pull(self, remote: RemoteDataset) -> AbstractAsyncContextManager[PullChannel]:
        """A pull channel, closed when the context ends."""

    @abstractmethod
    def push(self, remote: RemoteDataset) -> AbstractAsyncContextManager[PushChannel]:
        """A push channel, closed when the context ends."""
