"""The client SDK: ``Client`` (async) and ``SyncClient``, their errors, and ``open_dataset`` for reading a
pulled dataset (from :mod:`smart_transfer.reading`). Names are imported on first use, so a program pays
only for what it uses (the SDK pulls in aiohttp and websockets)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from smart_transfer.client.client import (
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
    from smart_transfer.client.options import ClientOptions
    from smart_transfer.client.sync_client import SyncClient
    from smart_transfer.reading.dataset import LocalDataset, open_dataset

_WHERE = {  # name -> module that defines it
    "Client": "smart_transfer.client.client",
    "ClientOptions": "smart_transfer.client.options",
    "DivergedError": "smart_transfer.client.client",
    "InvalidUrl": "smart_transfer.client.client",
    "LocalError": "smart_transfer.client.client",
    "ProgressUpdate": "smart_transfer.client.client",
    "RemoteError": "smart_transfer.client.client",
    "SmartTransferError": "smart_transfer.client.client",
    "TransferFailed": "smart_transfer.client.client",
    "TransferSummary": "smart_transfer.client.client",
    "SyncClient": "smart_transfer.client.sync_client",
    "LocalDataset": "smart_transfer.reading.dataset",
    "open_dataset": "smart_transfer.reading.dataset",
}
__all__ = [
    "Client",
    "ClientOptions",
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
    return getattr(importlib.import_module(_WHERE[name]), name)
