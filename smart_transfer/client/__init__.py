"""The client side: the SDK (async ``Client``, synchronous ``SyncClient``) and the ``smart-transfer`` CLI."""

from smart_transfer.client.sdk import Client, DivergedError, ProgressUpdate, RemoteError, TransferSummary
from smart_transfer.client.sync import SyncClient

__all__ = ["Client", "DivergedError", "ProgressUpdate", "RemoteError", "SyncClient", "TransferSummary"]
