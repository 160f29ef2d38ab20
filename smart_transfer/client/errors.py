"""Errors the CLI reports as one line, with the exit code each one means."""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_REJECTED = 3


class CliError(Exception):
    """A user-facing failure: one clear line and an exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        self.exit_code = exit_code
        super().__init__(message)
