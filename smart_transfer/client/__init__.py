"""The client SDK and CLI."""

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

__all__ = [
    "Client",
    "DivergedError",
    "InvalidUrl",
    "LocalError",
    "ProgressUpdate",
    "RemoteError",
    "SmartTransferError",
    "SyncClient",
    "TransferFailed",
    "TransferSummary",
]
