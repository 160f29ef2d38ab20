"""A synchronous facade over the async Client, for scripts and notebooks without an event loop."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from smart_transfer.client.client import Client, TransferSummary
from smart_transfer.client.inspection.status import DatasetStatus
from smart_transfer.client.options import ClientOptions
from smart_transfer.model.selection import Selection
from smart_transfer.model.versions import Range
from smart_transfer.protocol.rest import DatasetInfo
from smart_transfer.repo import Workspace

if TYPE_CHECKING:
    from smart_transfer.client.flows.drop import DropReport
    from smart_transfer.reading.dataset import LocalDataset


_OPTION_FIELDS = {field.name for field in dataclasses.fields(ClientOptions) if field.init}


class SyncClient:
    """``SyncClient(workspace_dir).pull(url)`` / ``.push(name, url)`` / ``.dataset(name).to_pandas()``;
    same options as ``Client``."""

    def __init__(
        self, workspace: Workspace | Path | str | None = None, options: ClientOptions | None = None, **values: Any
    ) -> None:
        """``workspace``: an open Workspace (left open on close), or a directory to open; ``options`` and
        ``values``: as ``Client`` takes them (checked before the workspace is opened)."""
        settings = {name: values.pop(name) for name in list(values) if name in _OPTION_FIELDS}
        options = (options or ClientOptions()).with_values(**settings)
        self._owns_workspace = not isinstance(workspace, Workspace)
        if isinstance(workspace, Workspace):
            self.workspace = workspace
        else:
            self.workspace = Workspace(Path(workspace) if workspace is not None else Workspace.default_root())
        self._client = Client(self.workspace, options, **values)

    def pull(
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
        """Pull ``url`` into the workspace (see ``Client.pull``: what each keyword selects; ``Client.follow``
        stays in sync)."""
        pulling = self._client.pull(
            url,
            as_name,
            force,
            announce,
            all_checkpoints=all_checkpoints,
            state_only=state_only,
            blocks=blocks,
            since=since,
            last=last,
            selection=selection,
        )
        return asyncio.run(pulling)

    def fetch(self, name: str, selection: Selection) -> TransferSummary:
        """Fetch what ``selection`` wants of dataset ``name``, widening the recorded selection (see
        ``Client.fetch``)."""
        return asyncio.run(self._client.fetch(name, selection))

    def drop(
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
        """Delete local object files dataset ``name`` no longer keeps (see ``Client.drop``: the keywords)."""
        return asyncio.run(
            self._client.drop(
                name,
                older_checkpoints=older_checkpoints,
                state_only=state_only,
                blocks=blocks,
                since=since,
                last=last,
                dry_run=dry_run,
            )
        )

    def push(self, name: str, url: str | None = None, force: bool = False) -> TransferSummary:
        """Push dataset ``name`` to ``url`` or its remote (see ``Client.push``)."""
        return asyncio.run(self._client.push(name, url, force=force))

    def status(self, name: str, url: str | None = None) -> DatasetStatus:
        """How dataset ``name`` relates to its remote or ``url`` (see ``Client.status``)."""
        return asyncio.run(self._client.status(name, url))

    def list_datasets(self, server_url: str) -> list[DatasetInfo]:
        """The datasets a server lets the token read (see ``Client.list_datasets``)."""
        return asyncio.run(self._client.list_datasets(server_url))

    def dataset(self, name: str, *, fetch: bool = False) -> LocalDataset:
        """Dataset ``name`` for reading: ``files()``, ``to_arrow()``, ``to_pandas()``, ``to_spark(spark)``
        (see ``LocalDataset``); valid while this client is open. ``fetch``: a read of slices this partial
        workspace left out by choice fetches them from the dataset's remote (``fetch``, verified and stored
        like any pull) instead of raising ``AbsentByChoice``; off by default, so that a read never goes to
        the network unless asked."""
        return self._client.dataset(name, fetch=self.fetch if fetch else None)

    def close(self) -> None:
        """Close the workspace when this client opened it."""
        if self._owns_workspace:
            self.workspace.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
