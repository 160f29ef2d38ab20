"""A synchronous facade over the async Client, for scripts and notebooks without an event loop."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Self

from smart_transfer.client.sdk import Client, TransferSummary
from smart_transfer.repo import Workspace


class SyncClient:
    """``SyncClient(workspace_dir).pull(url)`` / ``.push(name, url)``; same options as ``Client``."""

    def __init__(self, workspace: Workspace | Path | str | None = None, **options: Any) -> None:
        """``workspace``: an open Workspace (left open on close), or a directory to open."""
        self._owns_workspace = not isinstance(workspace, Workspace)
        if isinstance(workspace, Workspace):
            self.workspace = workspace
        else:
            self.workspace = Workspace(Path(workspace) if workspace is not None else Workspace.default_root())
        self._client = Client(self.workspace, **options)

    def pull(self, url: str, as_name: str | None = None, force: bool = False) -> TransferSummary:
        """Pull ``url`` into the workspace (see ``Client.pull``)."""
        return asyncio.run(self._client.pull(url, as_name=as_name, force=force))

    def push(self, name: str, url: str, force: bool = False) -> TransferSummary:
        """Push dataset ``name`` to ``url`` (see ``Client.push``)."""
        return asyncio.run(self._client.push(name, url, force=force))

    def close(self) -> None:
        if self._owns_workspace:
            self.workspace.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
