"""One job through a flow: what a pull, a push or a follow works on and with, built once by the Client from
its options (``FlowJob.of``) and carried down the flow unchanged. The settings are the client's own
``ClientOptions``, read from here; what a flow needs beyond them (the bounds of object transfers over this
transport in this direction, the rate limiter and peer health the client shares between its operations,
the progress callback) is derived once, never re-declared."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from msgspec import Struct

from smart_transfer.client.options import ClientOptions
from smart_transfer.client.remote import RemoteDataset
from smart_transfer.client.transports.base import Transport
from smart_transfer.model.selection import Selection
from smart_transfer.repo import Workspace
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.transfer.limits import Timeouts
from smart_transfer.transfer.peers import PeerHealth
from smart_transfer.transfer.ratelimit import RateLimiter


class ProgressUpdate(Struct, frozen=True):
    """Where a transfer stands; passed to the ``progress`` callback."""

    operation: str
    objects_done: int
    objects_total: int
    bytes_done: int
    bytes_total: int


ProgressCallback = Callable[[ProgressUpdate], None]


class HeapPolicy(Protocol):
    """What the process does with the objects a pull keeps alive from its decoded metadata to its commit:
    the process's owner decides (the console script freezes them, ``cli/heap.py``); the SDK has none."""

    def hold(self) -> None:
        """The pull's decoded blocks are alive now, and stay so until ``release``."""

    def release(self) -> None:
        """The pull is done with them."""


class ClientTools(Struct, frozen=True):
    """What a Client keeps across its operations besides its settings: one rate limiter (``--limit-rate``
    bounds the client, not each operation), one cache of peers' health, the progress callback, and the
    heap policy of the process that made it (None: the host's collector is left alone)."""

    limiter: RateLimiter | None = None
    peer_health: PeerHealth | None = None
    progress: ProgressCallback | None = None
    heap: HeapPolicy | None = None


class FlowJob(Struct, frozen=True):
    """One pull, push or follow of dataset ``dataset`` of ``workspace`` with ``remote`` over
    ``transport``."""

    workspace: Workspace
    dataset: DatasetRepository
    remote: RemoteDataset
    transport: Transport
    settings: ClientOptions
    tools: ClientTools
    #: The bounds of each object transfer over this transport in this flow's direction.
    timeouts: Timeouts
    force: bool = False
    #: The URL where this workspace serves the dataset's objects (``peer serve``), told to the server.
    announce: str | None = None
    #: Which objects a pull moves besides the metadata (the latest checkpoint's files, or every one's).
    selection: Selection = Selection()

    @classmethod
    def of(
        cls,
        transport: Transport,
        settings: ClientOptions,
        tools: ClientTools,
        target: tuple[Workspace, str, RemoteDataset],
        *,
        upload: bool,
        force: bool = False,
        announce: str | None = None,
        selection: Selection | None = None,
    ) -> FlowJob:
        """The job of moving dataset ``target[1]`` of workspace ``target[0]`` to (``upload``) or from
        remote ``target[2]``."""
        workspace, name, remote = target
        timeouts = transport.object_timeouts(settings.timeouts, upload)
        chosen = selection if selection is not None else Selection()
        dataset = workspace.dataset(name)
        return cls(workspace, dataset, remote, transport, settings, tools, timeouts, force, announce, chosen)
