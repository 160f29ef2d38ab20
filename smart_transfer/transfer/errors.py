"""Data-plane errors: an object that could not be moved or verified (no network library imported here,
so the CLI can name them without loading one)."""

from __future__ import annotations

from smart_transfer.protocol.codes import ErrorCode


class TransferFailed(Exception):
    """An object could not be moved or did not verify; names the object. ``network``: storage could
    not be reached (another path, through the server, may work); ``stalled``: storage accepted the
    request and then stopped answering (every path to it would wait the same); ``status``: the HTTP
    status of an error answer, when there was one (a peer's 429 says busy, not gone)."""

    def __init__(
        self, object_name: str, reason: str, *, network: bool = False, stalled: bool = False, status: int | None = None
    ) -> None:
        self.object_name = object_name
        self.reason = reason
        self.network = network
        self.stalled = stalled
        self.status = status
        super().__init__(f"{object_name}: {reason}")

    def __str__(self) -> str:
        if self.stalled:
            return f"{self.reason} (object {self.object_name}); nothing was committed: run it again to resume"
        return f"{self.object_name}: {self.reason}"


class TransferRefused(TransferFailed):
    """The smart-transfer server itself refused the request with a typed error (simple protocol:
    a read-only token, a missing object...); not an expired URL, and retrying will not help."""

    def __init__(self, object_name: str, code: ErrorCode, message: str) -> None:
        self.code = code
        super().__init__(object_name, f"{message} ({code.value})")


class UrlExpired(Exception):
    """The store refused the URL (403): it expired or is no longer valid; ask for a fresh one.
    ``moved``: bytes that did move before the refusal (parts or ranges of a large object that
    completed), so the transfer progressed and the fresh URLs need only cover the rest. ``refusal``:
    what the store said, for the one line a user reads when fresh URLs are refused too."""

    def __init__(self, name: str = "", moved: int = 0, refusal: str = "the store refused the URL (HTTP 403)") -> None:
        self.moved = moved
        self.refusal = refusal
        super().__init__(name)


def refused_fresh_urls(refusal: str, times: int) -> str:
    """The one line of an object whose fresh URLs the store refused ``times`` in a row: a URL this fresh
    has not expired, so the store wants what the request did not carry."""
    return (
        f"{refusal} with {times} fresh URLs in a row: not an expired URL; the store requires something "
        "the request did not carry (the headers the URL was signed with, e.g. server-side encryption) "
        "or the server's credentials lack that access"
    )


class StorageUnreachable(ConnectionError):
    """An attempt found no answer from storage: no connection, or one that broke (retried)."""


class StorageStalled(TimeoutError):
    """Storage took a request and then ran out of time: no byte for the read timeout (``no_byte``)
    or the whole attempt took longer than its total (retried)."""

    def __init__(self, message: str, *, no_byte: bool) -> None:
        self.no_byte = no_byte
        super().__init__(message)
