"""Typed repository errors."""

from __future__ import annotations


class RepositoryError(Exception):
    """Base of repository errors."""


class DatasetNotFound(RepositoryError):
    """No dataset of that name (it has no head)."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"dataset not found: {name}")


class HeadMoved(RepositoryError):
    """The head was not where the caller expected it: someone else moved it first."""

    def __init__(self, expected: str | None, actual: str | None) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(f"head moved: expected {expected or 'no head'}, found {actual or 'no head'}")


class CorruptRepository(RepositoryError):
    """The stored chain is missing a block or breaks a chain rule."""


class WorkspaceNotFound(RepositoryError):
    """A read-only command named a workspace directory that does not exist."""
