"""The client SDK and CLI. Names are imported on first use, so the CLI's start-up pays only for the
command it runs (the SDK pulls in aiohttp and websockets)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from smart_transfer.client.read import LocalDataset, open_dataset
    from smart_transfer.client.sdk import (
        Client,
        DivergedError,
        InvalidUrl,
        LocalError,
        ProgressUpdate,
        RemoteError,
        SmartTransferError,
        TransferFailed,
        TransferSummary,
    )
    from smart_transfer.client.sync import SyncClient

_WHERE = {
    "Client": "sdk",
    "DivergedError": "sdk",
    "InvalidUrl": "sdk",
    "LocalError": "sdk",
    "ProgressUpdate": "sdk",
    "RemoteError": "sdk",
    "SmartTransferError": "sdk",
    "TransferFailed": "sdk",
    "TransferSummary": "sdk",
    "SyncClient": "sync",
    "LocalDataset": "read",
    "open_dataset": "read",
}
__all__ = [
    "Client",
    "DivergedError",
    "InvalidUrl",
    "LocalDataset",
    "LocalError",
    "ProgressUpdate",
    "RemoteError",
    "SmartTransferError",
    "SyncClient",
    "TransferFailed",
    "TransferSummary",
    "open_dataset",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"smart_transfer.client.{_WHERE[name]}"), name)
