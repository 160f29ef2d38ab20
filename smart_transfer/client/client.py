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
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from smart_transfer.client.flows.follow import Follower
from smart_transfer.client.flows.job import ClientTools, FlowJob, HeapPolicy, ProgressCallback, ProgressUpdate
from smart_transfer.client.flows.moving import TransferSummary
from smart_transfer.client.flows.pull import follow as follow_flow
from smart_transfer.client.flows.pull import pull as pull_flow
from smart_transfer.client.flows.push import push as push_flow
from smart_transfer.client.options import DEFAULT_FOLLOW_RECONNECT_ATTEMPTS, PROTOCOLS, ClientOptions
from smart_transfer.client.remote import PEER_URL, RemoteDataset, RemoteServer, is_url, redact
from smart_transfer.client.transports.base import Transport
from smart_transfer.client.transports.smart import SmartTransport
from smart_transfer.config.values import BadValue
from smart_transfer.errors import (
    DivergedError,
    FollowUnsupported,
    InvalidUrl,
    LocalError,
    RemoteError,
    SmartTransferError,
    sdk_errors,
)
from smart_transfer.model import DatasetName, InvalidDatasetName
from smart_transfer.model.selection import Selection
from smart_transfer.model.versions import Range, pull_selection
from smart_transfer.protocol import check_token
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import BusyDetails
from smart_transfer.protocol.messages import check_peer_url
from smart_transfer.repo import Workspace
from smart_transfer.transfer.backoff import backoff_delay
from smart_transfer.transfer.errors import TransferFailed
from smart_transfer.transfer.peers import PeerHealth
from smart_transfer.transfer.ratelimit import RateLimiter

log = logging.getLogger("smart_transfer.client")
#: Attempts when the server says it is busy, and the longest wait between them (seconds).
BUSY_ATTEMPTS = 6
MAX_BUSY_DELAY = 30.0

Operation = Callable[[Transport], Awaitable[TransferSummary]]
R = TypeVar("R")

if TYPE_CHECKING:  # loaded by the commands that use them, not by every pull and push
    from smart_transfer.client.flows.drop import DropReport
    from smart_transfer.client.inspection.status import DatasetStatus
    from smart_transfer.client.inspection.verify import VerifyReport
    from smart_transfer.protocol.rest import DatasetInfo
    from smart_transfer.reading.absent import FetchAbsent
    from smart_transfer.reading.dataset import LocalDataset


class Client:
    """Pulls and pushes datasets between ``workspace`` and smart-transfer servers."""

    def __init__(
        self,
        workspace: Workspace | None,
        options: ClientOptions | None = None,
        *,
        token: str | None = None,
        progress: ProgressCallback | None = None,
        warn: Callable[[str], None] | None = None,
        transport: Transport | None = None,
        heap: HeapPolicy | None = None,
        **values: Any,
    ) -> None:
        """``options``: every bound (parallelism, timeouts, protocol, large objects, peers; see
        ``ClientOptions``); ``values``: the same as keywords, on top of ``options`` (``parallel=4``).
        ``transport``: the transport every operation uses (default: the smart protocol with a fallback to
        the simple one, or the one ``options.protocol`` names), so a caller or a test can inject one.
        ``heap``: what the process does with a pull's decoded blocks while the pull uses them (None, the
        default: nothing; the host's collector is its own).
        A bound out of range raises ``SettingError`` (a ValueError) naming it; a token that cannot be a
        bearer token (spaces, control characters) raises ``InvalidToken`` (a ValueError). ``workspace`` None: a
        client for the server-side calls only (``list_datasets``)."""
        self._workspace = workspace
        self.settings = (options or ClientOptions()).with_values(**values)
        check_token(token)
        self.token = token
        self.warn = warn or log.warning
        self.transport = transport
        settings = self.settings
        #: What the client's operations share besides the settings (one rate limiter, peers' health).
        self.tools = ClientTools(
            RateLimiter(settings.limit_rate) if settings.limit_rate else None,
            PeerHealth(settings.peer_check_age) if settings.peers else None,
            progress,
            heap,
        )

    @property
    def workspace(self) -> Workspace:
        """The workspace this client pulls into and pushes from."""
        if self._workspace is None:
            raise LocalError(ErrorCode.INVALID_REQUEST, "this client was made without a workspace")
        return self._workspace

    @property
    def protocol(self) -> str:
        """The protocol operations use: the injected transport's, else the options'."""
        return self.transport.name if self.transport is not None else self.settings.protocol

    async def pull(
        self,
        url: str,
        as_name: str | None = None,
        force: bool = False,
        announce: str | None = None,
        *,
        all_checkpoints: bool = False,
        state_only: bool = False,
        blocks: str | Range | None = None,
        since: str | datetime | None = None,
        last: int | None = None,
        selection: Selection | None = None,
    ) -> TransferSummary:
        """Bring the local dataset up to the remote head. ``url``: the remote dataset's URL, or the name
        of a workspace dataset with a remote (see ``remote_of``). ``announce``: the URL of a ``peer
        serve`` of this workspace, told to the server so other readers fetch objects from it. The pull
        moves every block, every checkpoint's manifest and every data slice, and the files of the latest
        checkpoint only (the one a reader restores); ``all_checkpoints``: the files of every checkpoint
        of the chain too (what earlier pulls left out included). At most one range of data slices:
        ``state_only`` (none: the chain and the latest checkpoint, to restore state), ``blocks`` (the
        slices added by blocks ``"FIRST-LAST"`` or ``(first, last)``, inclusive, either end open),
        ``since`` (those of blocks whose system time is at or after it: ``"2026-01-31T12:00:00Z"``, UTC
        unless it names a zone, or an aware datetime) or ``last`` (those holding the last N records; a
        slice with any of them counts whole); or ``selection``, the same choice as one value (what
        ``smart_transfer.model.versions.pull_selection`` makes of the command line's words), instead of
        those keywords. The workspace records the choice: ``status``, ``verify``
        and a later pull know what is absent by choice; a wider pull moves only the difference. A
        malformed, future or contradicting choice, or blocks past the remote head, raise LocalError
        (a usage error) before anything is moved. Raises SmartTransferError (RemoteError,
        LocalError, DivergedError, InvalidUrl) or TransferFailed; on any failure the local head is
        unchanged."""
        remote, name = self._target(url, as_name)
        announced = self._announced(announce, name)
        selection = _selection(selection, all_checkpoints, state_only, blocks, since, last)
        summary = await self._run(
            lambda transport: pull_flow(
                self._job(transport, name, remote, upload=False, force=force, announce=announced, selection=selection)
            )
        )
        self._remember(name, remote)
        return summary

    async def fetch(self, name: str, selection: Selection) -> TransferSummary:
        """Fetch on demand what ``selection`` wants of workspace dataset ``name`` (e.g. the slices a read
        found absent by choice: ``AbsentByChoice.wanted``): a pull from its remote with the recorded
        selection widened by ``selection`` (their union), so the workspace records the wider choice and
        nothing fetched is ever confused with loss. Like any pull it also brings the remote's new blocks;
        raises like ``pull``."""
        with sdk_errors():
            recorded = await asyncio.to_thread(self.workspace.selections.get, str(DatasetName(name)))
        return await self.pull(name, selection=recorded.union(_given(selection)))

    async def drop(
        self,
        name: str,
        *,
        older_checkpoints: bool = False,
        state_only: bool = False,
        blocks: str | Range | None = None,
        since: str | datetime | None = None,
        last: int | None = None,
        dry_run: bool = False,
    ) -> DropReport:
        """Delete local object files of workspace dataset ``name`` that it no longer keeps, recording the
        narrower choice first: the data slices outside one range (``state_only``, ``blocks``, ``since``,
        ``last``, as ``pull`` takes them; replacing the recorded range) and, with ``older_checkpoints``, the
        files of every checkpoint but the latest. Never the server's, never what a later push needs unless
        the server holds it (the objects of blocks after the remote head stay). ``dry_run``: only report.
        Raises LocalError (a usage error, nothing changed) for a bad or widening choice, a dataset with no
        remote, or a workspace open read-only."""
        from smart_transfer.client.flows.drop import drop, drop_selection  # loads with the command that drops

        with sdk_errors():
            recorded = await asyncio.to_thread(self.workspace.selections.get, str(DatasetName(name)))
        selection = drop_selection(
            recorded, older_checkpoints=older_checkpoints, state_only=state_only, blocks=blocks, since=since, last=last
        )
        return await asyncio.to_thread(drop, self.workspace, name, selection, dry_run=dry_run)

    def _job(
        self,
        transport: Transport,
        name: str,
        remote: RemoteDataset,
        *,
        upload: bool,
        force: bool,
        announce: str | None = None,
        selection: Selection | None = None,
    ) -> FlowJob:
        """The one job of a pull, push or follow of ``name`` over ``transport``."""
        return FlowJob.of(
            transport,
            self.settings,
            self.tools,
            (self.workspace, name, remote),
            upload=upload,
            force=force,
            announce=announce,
            selection=selection,
        )

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
        all_checkpoints: bool = False,
        state_only: bool = False,
        blocks: str | Range | None = None,
        since: str | datetime | None = None,
        last: int | None = None,
        selection: Selection | None = None,
    ) -> int:
        """Pull, then stay in sync: every time the remote head moves, pull the increment in the same
        session and call ``on_update`` with its summary (the first pull's too), until ``stop`` is set.
        A session that drops is resumed with a normal pull, up to ``reconnect_attempts`` times in a row.
        Smart protocol only; ``all_checkpoints``, ``state_only``, ``blocks``, ``since`` and ``last`` as
        for ``pull``, kept for every update (a follower of the last N records stays bounded). Returns the number of
        updates; raises like ``pull``."""
        if self.protocol != "smart":
            raise FollowUnsupported()
        remote, name = self._target(url, as_name)
        announced = self._announced(announce, name)
        selection = _selection(selection, all_checkpoints, state_only, blocks, since, last)

        def job() -> FlowJob:
            return self._job(
                self._smart(), name, remote, upload=False, force=force, announce=announced, selection=selection
            )

        async def session(report: Callable[[TransferSummary], None]) -> None:
            await retry_when_busy(lambda: follow_flow(job(), report, stop), self.warn)

        def first_update(summary: TransferSummary) -> None:
            if not remembered:  # the first catch-up, as a plain pull does: `status` and `pull NAME` work now
                self._remember(name, remote)
                remembered.append(True)
            on_update(summary)

        remembered: list[bool] = []
        return await Follower(session, first_update, stop, self.warn, reconnect_attempts).run(name)

    def _target(self, url: str, as_name: str | None) -> tuple[RemoteDataset, str]:
        """The remote dataset and the local name a pull of ``url`` (a URL or a dataset name) means."""
        remote, name = _parse_target(url, as_name)
        return (remote if remote is not None else self.remote_of(name)), name

    def _announced(self, announce: str | None, name: str) -> str | None:
        """The dataset URL a ``peer serve`` at ``announce`` serves ``name`` at (smart protocol only)."""
        return _announced_url(announce, name, self.protocol)

    @staticmethod
    def check_pull(url: str, as_name: str | None, announce: str | None, protocol: str) -> None:
        """Refuse a pull its arguments already doom (a bad URL, name or peer URL; announcing over the
        simple protocol) before anything is opened or created: the same checks ``pull`` makes."""
        _, name = _parse_target(url, as_name)
        _announced_url(announce, name, protocol)

    async def push(self, name: str, url: str | None = None, force: bool = False) -> TransferSummary:
        """Make the remote dataset's head the local head; ``url`` None: the dataset's remote. Raises
        like ``pull``; on any failure the remote head is unchanged."""
        remote = RemoteDataset.parse(url) if url is not None else self.remote_of(name)
        summary = await self._run(
            lambda transport: push_flow(self._job(transport, name, remote, upload=True, force=force))
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
        # the HTTP stack loads on use
        from smart_transfer.client.inspection.holdings import holdings
        from smart_transfer.client.inspection.status import dataset_status

        remote = RemoteDataset.parse(url) if url is not None else self.remote_of(name)
        with sdk_errors():
            dataset = self.workspace.dataset(name)
        status = await retry_when_busy(lambda: dataset_status(dataset, remote, self.token, self.settings), self.warn)
        with sdk_errors():
            status.partial = await asyncio.to_thread(holdings, self.workspace, name)  # local reads only
        return status

    async def list_datasets(self, server_url: str) -> list[DatasetInfo]:
        """The datasets of the server at ``server_url`` the token may read, each described (every page)."""
        return [info async for page in self.dataset_pages(server_url) for info in page]

    async def dataset_pages(self, server_url: str, page_size: int | None = None) -> AsyncIterator[list[DatasetInfo]]:
        """The datasets of the server at ``server_url`` the token may read, each described, a page at a
        time as the server pages them (``page_size`` per page; None: a short first page, so the first
        rows come sooner, then the server's default), each page retried when the server is Busy."""
        # the HTTP stack loads on use
        from smart_transfer.client.inspection.status import dataset_pages

        server = RemoteServer.parse(server_url)
        async for page in dataset_pages(
            server, self.token, self.settings, lambda run: retry_when_busy(run, self.warn), page_size
        ):
            yield page

    def dataset(self, name: str, *, fetch: FetchAbsent | None = None) -> LocalDataset:
        """Workspace dataset ``name`` for reading, pinned at its current head (see ``LocalDataset``; a read
        of slices absent by choice raises ``AbsentByChoice`` unless ``fetch`` is given: ``SyncClient.dataset
        (name, fetch=True)`` fetches them; here, catch it and ``await fetch(name, error.wanted)``)."""
        from smart_transfer.reading.dataset import LocalDataset  # the readers (pyarrow) load on use

        return LocalDataset(self.workspace, name, fetch=fetch)

    async def verify(self, name: str, url: str | None = None) -> VerifyReport:
        """Re-check workspace dataset ``name`` (chain rules, every block's and object's hash and size;
        corrupt objects go to quarantine) and, given ``url`` (or its remote when ``url`` is "remote"),
        say how it relates to the remote one."""
        # verify's modules load on use
        from smart_transfer.client.inspection.verify import compare_remote, verify_local

        report, blocks = verify_local(self.workspace, name)  # local reads; the loop has nothing else to do
        if url is not None:
            await retry_when_busy(lambda: compare_remote(report, blocks, url, self.token, self.settings), self.warn)
        return report

    async def _run(self, operation: Operation) -> TransferSummary:
        """The chosen protocol, waiting out Busy answers; when direct storage transfers fail for
        network reasons, the same operation again over the simple protocol through the server."""
        if self.transport is not None:
            return await self._when_not_busy(operation, self.transport)

        def simple(redirect: bool = True) -> Transport:
            from smart_transfer.client.transports.simple import SimpleTransport  # the HTTP stack loads on use

            return SimpleTransport(self.token, self.settings, redirect)

        if self.settings.protocol == "simple":
            return await self._when_not_busy(operation, simple())
        try:
            return await self._when_not_busy(operation, self._smart())
        except TransferFailed as exc:
            # a store that could not be reached may be reachable through the server; one that stopped
            # answering would keep the server waiting the same way, so that is reported at once
            if not (exc.network and self.settings.fallback):
                raise
            self.warn(f"direct storage transfer failed ({exc}); falling back to the simple protocol via the server")
            return await self._when_not_busy(operation, simple(redirect=False))

    def _smart(self) -> Transport:
        if self.transport is not None:
            return self.transport
        return SmartTransport(self.token, self.settings)

    async def _when_not_busy(self, operation: Operation, transport: Transport) -> TransferSummary:
        return await retry_when_busy(lambda: operation(transport), self.warn)


def _parse_target(url: str, as_name: str | None) -> tuple[RemoteDataset | None, str]:
    """What ``pull URL|DATASET [--as NAME]`` names: the remote (None: the dataset's own remote) and the
    local name."""
    if is_url(url):
        remote = RemoteDataset.parse(url)
        return remote, str(DatasetName(as_name)) if as_name is not None else remote.name
    if as_name is not None:
        raise InvalidUrl(f"{url!r} is not a URL: give a dataset URL with as_name (--as)")
    try:
        return None, str(DatasetName(url))
    except InvalidDatasetName:
        raise InvalidUrl(
            f"{redact(url)!r} is neither a dataset URL (http(s)://HOST[:PORT]/DATASET) nor a dataset name"
        ) from None


def _selection(
    selection: Selection | None,
    all_checkpoints: bool,
    state_only: bool,
    blocks: str | Range | None,
    since: str | datetime | None,
    last: int | None,
) -> Selection:
    """What a pull moves besides the metadata, from the SDK's arguments (the command line's one rule:
    ``model/versions.py``); a bad choice is a usage error."""
    if selection is not None:
        if all_checkpoints or state_only or (blocks, since, last) != (None, None, None):
            raise LocalError(ErrorCode.INVALID_REQUEST, "give either selection or the keywords that make one")
        return _given(selection)
    try:
        return pull_selection(
            all_checkpoints=all_checkpoints, state_only=state_only, blocks=blocks, since=since, last=last
        )
    except BadValue as exc:
        raise LocalError(ErrorCode.INVALID_REQUEST, str(exc)) from None


def _given(selection: object) -> Selection:
    """A selection the caller made (``selection=``, ``fetch``): a ``Selection`` checks itself when made
    (``model/selection.py``); anything else is a usage error."""
    if not isinstance(selection, Selection):
        raise LocalError(ErrorCode.INVALID_REQUEST, f"selection must be a Selection, not {type(selection).__name__}")
    return selection


def _announced_url(announce: str | None, name: str, protocol: str) -> str | None:
    if announce is None:
        return None
    if protocol != "smart":
        raise LocalError(ErrorCode.INVALID_REQUEST, "announcing a peer needs the smart protocol")
    url = RemoteServer.parse(announce, PEER_URL).dataset(name).url
    try:
        check_peer_url(url)
    except ValueError as exc:
        raise InvalidUrl(f"{redact(url)!r}: {exc}") from None
    return url


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
    "PROTOCOLS",
    "Client",
    "ClientOptions",
    "DivergedError",
    "InvalidUrl",
    "LocalError",
    "ProgressUpdate",
    "RemoteError",
    "SmartTransferError",
    "TransferFailed",
    "TransferSummary",
]
