"""The SDK's exceptions, as the SDK's users import them. They are defined in :mod:`smart_transfer.errors`,
below both the SDK and the local readers (:mod:`smart_transfer.reading`), which raise the same ones."""

from smart_transfer.errors import (
    DivergedError,
    FollowUnsupported,
    InvalidUrl,
    LocalError,
    RemoteError,
    SmartTransferError,
)

__all__ = ["DivergedError", "FollowUnsupported", "InvalidUrl", "LocalError", "RemoteError", "SmartTransferError"]
