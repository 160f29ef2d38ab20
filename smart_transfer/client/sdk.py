"""The SDK: an async ``Client`` that pulls and pushes datasets between a Workspace and a server.

Metadata travels in one WebSocket session per operation; object bytes go directly between this
process and storage through presigned URLs. Nothing becomes visible locally until every object is
verified (hash and size) and the local head moves by compare-and-swap; a re-run resumes, skipping
every object already present. The same flows run over the simple REST protocol when asked
(``protocol="simple"``) or, with a warning, when direct storage transfers fail for network reasons.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from smart_transfer.client.errors import (
    DivergedError,
    InvalidUrl,
    LocalError,
    RemoteError,
    SmartTransferError,
    sdk_errors,
)
from smart_transfer.client.flow import DEFAULT_PAGE_SIZE, FlowOptions, ProgressCallback, ProgressUpdate, TransferSummary
from smart_transfer.client.follow import Follower
from smart_transfer.client.pull import follow as follow_flow
from smart_transfer.client.pull import pull as pull_flow
from smart_transfer.client.push import push as push_flow
from smart_transfer.client.remote import RemoteDataset, RemoteServer, is_url, redact
from smart_transfer.client.settings import (
    DEFAULT_ANSWER_TIMEOUT,
    DEFAULT_FOLLOW_RECONNECT_ATTEMPTS,
    DEFAULT_KEEPALIVE_INTERVAL,
)
from smart_transfer.client.smart import SmartTransport
from smart_transfer.client.transport import Transport
from smart_transfer.model import DatasetName, InvalidDatasetName
from smart_transfer.protocol.errors import BusyDetails, ErrorCode
from smart_transfer.protocol.rest import DatasetInfo
from smart_transfer.repo import Workspace
from smart_transfer.transfer.backoff import backoff_delay
from smart_transfer.transfer.errors import TransferFailed
from smart_transfer.transfer.limits import DEFAULT_PARALLEL, LargeObjects, Timeouts
from smart_transfer.transfer.peers import DEFAULT_PEER_CHECK_AGE, PeerHealth
from smart_transfer.transfer.ratelimit import RateLimiter

log = logging.getLogger("smart_transfer.client")
#: The two ways to talk to a server.
PROTOCOLS = ("smart", "simple")
#: Attempts when the server says it is busy, and the longest wait between them (seconds).
BUSY_ATTEMPTS = 6
MAX_BUSY_DELAY = 30.0

Operation = Callable[[Transport], Awaitable[TransferSummary]]
R = TypeVar("R")

if TYPE_CHECKING:
    from smart_transfer.client.read import LocalDataset
    from smart_transfer.client.status import DatasetStatus


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
        timeouts: Timeouts | None = None,
        answer_timeout: float = DEFAULT_ANSWER_TIMEOUT,
        keepalive_interval: float = DEFAULT_KEEPALIVE_INTERVAL,
        peers: bool = True,
        peer_check_age: float = DEFAULT_PEER_CHECK_AGE,
        large: LargeObjects | None = None,
    ) -> None:
        """``timeouts`` bound every object transfer (connect, no byte for ``read`` seconds, a total
        by size, attempts); ``answer_timeout`` bounds every wait for the server's answer;
        ``keepalive_interval`` is how often a session says it is alive while objects move; ``peers``:
        fetch objects from the peers a pull plan lists before storage (verified, never trusted), with
        their connectivity results kept ``peer_check_age`` seconds; ``large``: how large objects move
        (ranged downloads above a threshold, ranges or parts in flight)."""
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}")
        if parallel < 1 or page_size < 1:
            raise ValueError("parallel and page_size must be at least 1")
        if answer_timeout <= 0 or keepalive_interval <= 0:
            raise ValueError("answer_timeout and keepalive_interval must be positive")
        self.workspace = workspace
        self.token = token
        self.protocol = protocol
        self.fallback = fallback
        self.warn = warn or log.warning
        self.answer_timeout = answer_timeout
        limiter = RateLimiter(limit_rate) if limit_rate else None
        self.options = FlowOptions(
            parallel=parallel,
            page_size=page_size,
            limiter=limiter,
            progress=progress,
            timeouts=(timeouts or Timeouts()).limited(limit_rate, parallel),
            keepalive_interval=keepalive_interval,
            peer_health=PeerHealth(peer_check_age) if peers else None,
            large=large or LargeObjects(),
        )

    async def pull(
        self, url: str, as_name: str | None = None, force: bool = False, announce: str | None = None
    ) -> TransferSummary:
        """Bring the local dataset up to the remote head. ``url``: the remote dataset's URL, or the name
        of a workspace dataset with a remote (see ``remote_of``). ``announce``: the URL of a ``peer
        serve`` of this workspace, told to the server so other readers fetch objects from it. Raises
        SmartTransferError (RemoteError, LocalError, DivergedError, InvalidUrl) or TransferFailed; on
        any failure the local head is unchanged."""
        remote, name = self._target(url, as_name)
        announced = self._announced(announce, name)
        summary = await self._run(
            lambda transport: pull_flow(self.workspace, transport, self.options, remote, name, force, announced)
        )
        self._remember(name, remote)
        return summary

    async def follow(
        self,
        url: str,
        on_update: Callable[[TransferSummary], None],
        stop: asyncio.Event,
        *,
        as_name: str | None = None,
        force: bool = False,
        announce: str | None = None,
        reconnect_attempts: int = DEFAULT_FOLLOW_RECONNECT_ATTEMPTS,
    ) -> int:
        """Pull, then stay in sync: every time the remote head moves, pull the increment in the same
        session and call ``on_update`` with its summary (the first pull's too), until ``stop`` is set.
        A session that drops is resumed with a normal pull, up to ``reconnect_attempts`` times in a row.
        Smart protocol only. Returns the number of updates; raises like ``pull``."""
        if self.protocol != "smart":
            raise LocalError(ErrorCode.INVALID_REQUEST, "following needs the smart protocol (one WebSocket session)")
        remote, name = self._target(url, as_name)
        announced = self._announced(announce, name)

        async def session(report: Callable[[TransferSummary], None]) -> None:
            await retry_when_busy(
                lambda: follow_flow(
                    self.workspace, self._smart(), self.options, remote, name, force, announced, report, stop
                ),
                self.warn,
            )

        updates = await Follower(session, on_update, stop, self.warn, reconnect_attempts).run(name)
        if updates:
            self._remember(name, remote)
        return updates

    def _target(self, url: str, as_name: str | None) -> tuple[RemoteDataset, str]:
        """The remote dataset and the local name a pull of ``url`` (a URL or a dataset name) means."""
        if is_url(url):
            remote = RemoteDataset.parse(url)
            return remote, as_name or remote.name
        if as_name is not None:
            raise InvalidUrl(f"{url!r} is not a URL: give a dataset URL with as_name (--as)")
        try:
            name = DatasetName(url)
        except InvalidDatasetName:
            raise InvalidUrl(
                f"{redact(url)!r} is neither a dataset URL (http(s)://HOST[:PORT]/DATASET) nor a dataset name"
            ) from None
        return self.remote_of(name), name

    def _announced(self, announce: str | None, name: str) -> str | None:
        """The dataset URL a ``peer serve`` at ``announce`` serves ``name`` at (smart protocol only)."""
        if announce is None:
            return None
        if self.protocol != "smart":
            raise LocalError(ErrorCode.INVALID_REQUEST, "announcing a peer needs the smart protocol")
        return RemoteServer.parse(announce).dataset(name).url

    async def push(self, name: str, url: str | None = None, force: bool = False) -> TransferSummary:
        """Make the remote dataset's head the local head; ``url`` None: the dataset's remote. Raises
        like ``pull``; on any failure the remote head is unchanged."""
        remote = RemoteDataset.parse(url) if url is not None else self.remote_of(name)
        summary = await self._run(
            lambda transport: push_flow(self.workspace, transport, self.options, remote, name, force)
        )
        self._remember(name, remote)
        return summary

    def remote_of(self, name: str) -> RemoteDataset:
        """The remote of workspace dataset ``name``: the URL it was first pulled from or pushed to, or
        the one set with ``remote set``. InvalidUrl (a usage error) when it has none."""
        with sdk_errors():
            url = self.workspace.remotes.get(DatasetName(name))
        if url is None:
            raise InvalidUrl(
                f"{name} has no remote: give its URL (the first one is remembered) or `remote set {name} URL`"
            )
        return RemoteDataset.parse(url)

    def _remember(self, name: str, remote: RemoteDataset) -> None:
        with sdk_errors():
            self.workspace.remotes.remember(DatasetName(name), remote.url)

    async def status(self, name: str, url: str | None = None) -> DatasetStatus:
        """How workspace dataset ``name`` relates to its remote (or ``url``): one request, nothing moves."""
        from smart_transfer.client.status import dataset_status  # the HTTP stack loads on use

        remote = RemoteDataset.parse(url) if url is not None else self.remote_of(name)
        with sdk_errors():
            dataset = self.workspace.dataset(name)
        return await retry_when_busy(lambda: dataset_status(dataset, remote, self.token), self.warn)

    async def list_datasets(self, server_url: str) -> list[DatasetInfo]:
        """The datasets of the server at ``server_url`` the token may read, each described."""
        from smart_transfer.client.status import list_datasets

        server = RemoteServer.parse(server_url)
        return await retry_when_busy(lambda: list_datasets(server, self.token), self.warn)

    def dataset(self, name: str) -> LocalDataset:
        """Workspace dataset ``name`` for reading, pinned at its current head (see ``LocalDataset``)."""
        from smart_transfer.client.read import LocalDataset

        return LocalDataset(self.workspace, name)

    async def _run(self, operation: Operation) -> TransferSummary:
        """The chosen protocol, waiting out Busy answers; when direct storage transfers fail for
        network reasons, the same operation again over the simple protocol through the server."""
        parallel, timeouts = self.options.parallel, self.options.timeouts

        def simple(redirect: bool = True) -> Transport:
            from smart_transfer.client.simple import SimpleTransport  # the HTTP stack loads on use

            return SimpleTransport(
                self.token, parallel, redirect, timeouts=timeouts, answer_timeout=self.answer_timeout
            )

        if self.protocol == "simple":
            return await self._when_not_busy(operation, simple())
        try:
            return await self._when_not_busy(operation, self._smart())
        except TransferFailed as exc:
            # a store that could not be reached may be reachable through the server; one that stopped
            # answering would keep the server waiting the same way, so that is reported at once
            if not (exc.network and self.fallback):
                raise
            self.warn(f"direct storage transfer failed ({exc}); falling back to the simple protocol via the server")
            return await self._when_not_busy(operation, simple(redirect=False))

    def _smart(self) -> SmartTransport:
        return SmartTransport(self.token, self.answer_timeout, self.options.timeouts.connect)

    async def _when_not_busy(self, operation: Operation, transport: Transport) -> TransferSummary:
        return await retry_when_busy(lambda: operation(transport), self.warn)


async def retry_when_busy(operation: Callable[[], Awaitable[R]], warn: Callable[[str], None]) -> R:
    """Run ``operation``; when the server answers Busy, wait as it asks (doubling, with jitter) and
    try again, up to BUSY_ATTEMPTS times."""
    for number in range(1, BUSY_ATTEMPTS + 1):
        try:
            return await operation()
        except RemoteError as exc:
            if exc.code is not ErrorCode.BUSY or number == BUSY_ATTEMPTS:
                raise
            base = float(exc.details.retry_after) if isinstance(exc.details, BusyDetails) else 1.0
            delay = backoff_delay(number, base, MAX_BUSY_DELAY)
            warn(f"server busy; retrying in {delay:.1f} s")
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")


__all__ = [
    "Client",
    "DivergedError",
    "InvalidUrl",
    "LocalError",
    "ProgressUpdate",
    "RemoteError",
    "SmartTransferError",
    "TransferFailed",
    "TransferSummary",
]
