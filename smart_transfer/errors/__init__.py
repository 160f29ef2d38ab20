"""The SDK's exceptions. Every failure of a pull, push or verify is one of these (or, for the data
plane, ``TransferFailed``), each with an ``ErrorCode`` from the one vocabulary and whether the server
said it (``RemoteError``) or this side found it (``LocalError``). The CLI maps them to exit codes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from smart_transfer.model import InvalidDatasetName, ModelError
from smart_transfer.protocol.codes import REJECTIONS, ErrorCode
from smart_transfer.protocol.errors import Details, ProtocolError, details_json
from smart_transfer.repo.errors import CorruptRepository, DatasetNotFound, HeadMoved, RepositoryError, WorkspaceNotFound


class SmartTransferError(Exception):
    """Base of the SDK's errors: a code, a message, and the code's typed details when known."""

    remote = False

    def __init__(
        self, code: ErrorCode, message: str, details: Details | None = None, raw: dict[str, Any] | None = None
    ) -> None:
        self.code = code
        self.message = message
        self.details = details
        self.raw_details = raw if raw is not None else details_json(details)
        super().__init__(message)

    @property
    def rejected(self) -> bool:
        """The histories or the grants refuse the operation (exit 3), as opposed to a failure (exit 1)."""
        return self.code in REJECTIONS

    def __str__(self) -> str:
        return f"{self.message} ({self.code.value})"


class RemoteError(SmartTransferError):
    """The server refused or failed the operation and said so."""

    remote = True


class LocalError(SmartTransferError):
    """This side found the problem: the server was unreachable, broke the protocol or sent bad data."""


class InvalidUrl(LocalError):
    """A dataset URL that cannot be used (a usage error)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_REQUEST, message)

    def __str__(self) -> str:
        return self.message


class FollowUnsupported(LocalError):
    """Following (``pull --follow``) over a protocol that cannot keep one session open: the simple one
    (a usage error: exit 2)."""

    def __init__(self) -> None:
        super().__init__(ErrorCode.INVALID_REQUEST, "following needs the smart protocol (one WebSocket session)")


class DivergedError(SmartTransferError):
    """Local and remote histories differ; ``force`` would replace one with the other."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.DIVERGED, message)

    def __str__(self) -> str:
        return self.message


def from_protocol(error: ProtocolError, *, remote: bool, context: str = "") -> SmartTransferError:
    """An SDK error for a ProtocolError raised by a shared rule (``context`` prefixes the message)."""
    kind = RemoteError if remote else LocalError
    message = f"{context}{error.message}"
    return kind(error.code, message, error.details, error.details_dict())


@contextmanager
def sdk_errors() -> Iterator[None]:
    """The workspace's own errors as the SDK's exceptions (callers catch SmartTransferError)."""
    try:
        yield
    except InvalidDatasetName as exc:
        raise LocalError(ErrorCode.INVALID_DATASET_NAME, str(exc)) from None
    except DatasetNotFound as exc:
        raise LocalError(ErrorCode.DATASET_NOT_FOUND, f"{exc} in the workspace") from None
    except HeadMoved as exc:
        raise LocalError(ErrorCode.INVALID_HEAD, f"the local dataset changed meanwhile ({exc}); run it again") from None
    except WorkspaceNotFound as exc:
        raise LocalError(ErrorCode.DATASET_NOT_FOUND, str(exc)) from None
    except CorruptRepository as exc:
        raise LocalError(ErrorCode.INTERNAL, f"the workspace is damaged: {exc}") from None
    except (ModelError, RepositoryError) as exc:
        raise LocalError(ErrorCode.INTERNAL, str(exc)) from None
