"""The command line's exit codes and its own usage error. Kept free of heavy imports: every command,
``--help`` included, loads this module."""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_REJECTED = 3


class CliError(Exception):
    """A command-line usage or input problem: one clear line and an exit code (never raised by the SDK)."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        self.exit_code = exit_code
        super().__init__(message)
