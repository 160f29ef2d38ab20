"""The ``smart-transfer`` command line. Every failure is one line on stderr and a non-zero exit:
1 error, 2 usage, 3 diverged or rejected (including a token that lacks the grant)."""

from __future__ import annotations

import sys

try:
    import argparse
    import os
    from collections.abc import Callable, Sequence
    from typing import TYPE_CHECKING

    import smart_transfer
    from smart_transfer.cli.commands import data, diff, ingest, peer, remotes, server, transfer, workspace
    from smart_transfer.cli.commands.common import Parser
    from smart_transfer.cli.exits import EXIT_ERROR, EXIT_REJECTED, EXIT_USAGE, CliError
except KeyboardInterrupt:  # Ctrl-C while the command starts (slow on a busy machine): one line, not
    # the traceback of whichever import it landed in; nothing has been touched yet
    sys.stderr.write("smart-transfer: error: interrupted\n")
    raise SystemExit(130) from None

if TYPE_CHECKING:
    from smart_transfer.errors import SmartTransferError

# Start-up time is part of every command: this module and the parser it builds import nothing heavy
# (no pydantic, aiohttp, boto3 or pyarrow); each command imports what it uses when it runs.
Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="smart-transfer",
        description="Sync versioned datasets between local workspaces and a server on object storage.",
        epilog="Exit codes: 0 done, 1 error, 2 usage, 3 diverged or rejected (histories or grants).",
    )
    parser.add_argument("--version", action="version", version=f"smart-transfer {smart_transfer.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    server.register(commands)
    workspace.register(commands)
    diff.register(commands)
    ingest.register(commands)
    transfer.register(commands)
    peer.register(commands)
    remotes.register(commands)
    data.register(commands)
    return parser


def exit_code(exc: BaseException) -> tuple[int, str]:
    """The exit code and the one line a failure is reported with."""
    if isinstance(exc, CliError):
        return exc.exit_code, str(exc)
    if isinstance(exc, KeyboardInterrupt):
        return 130, "interrupted"
    # only a failure pays for these imports (the command that raised has loaded them already)
    from smart_transfer.errors import SmartTransferError
    from smart_transfer.transfer.errors import TransferFailed, TransferRefused

    if isinstance(exc, SmartTransferError):
        return _sdk_exit(exc), str(exc)
    if isinstance(exc, TransferRefused):
        from smart_transfer.protocol.errors import REJECTIONS

        return (EXIT_REJECTED if exc.code in REJECTIONS else EXIT_ERROR), f"transfer refused: {exc}"
    if isinstance(exc, TransferFailed):
        return EXIT_ERROR, f"transfer failed: {exc}"
    return _lower_exit(exc)


def _sdk_exit(exc: SmartTransferError) -> int:
    from smart_transfer.protocol.errors import ErrorCode

    if exc.rejected:
        return EXIT_REJECTED
    #: codes that mean the command line itself was wrong when this side found them
    usage = not exc.remote and exc.code in (ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_DATASET_NAME)
    return EXIT_USAGE if usage else EXIT_ERROR


def _lower_exit(exc: BaseException) -> tuple[int, str]:
    """The exit of an error a lower layer raised past the SDK (the workspace's, the store's)."""
    from smart_transfer.config import SettingError
    from smart_transfer.model import InvalidDatasetName, ModelError
    from smart_transfer.repo import HeadMoved, RepositoryError
    from smart_transfer.storage import StorageError

    if isinstance(exc, HeadMoved):
        return EXIT_REJECTED, str(exc)
    if isinstance(exc, InvalidDatasetName | SettingError):
        return EXIT_USAGE, str(exc)
    if isinstance(exc, ModelError | StorageError | RepositoryError | OSError):
        return EXIT_ERROR, str(exc)
    return EXIT_ERROR, f"unexpected {type(exc).__name__}: {exc}"  # a bug must still not show a traceback


#: Longest error line (a lower layer's message may quote a whole document).
MAX_ERROR_CHARS = 600


def one_line(message: str) -> str:
    """A failure's message as the one line the command prints: lines joined, cut at MAX_ERROR_CHARS."""
    joined = " ".join(part.strip() for part in message.splitlines() if part.strip())
    return joined if len(joined) <= MAX_ERROR_CHARS else joined[: MAX_ERROR_CHARS - 1] + "…"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    try:
        args = build_parser().parse_args(argv)
        handler: Handler = args.handler
        return handler(args)
    except BrokenPipeError:
        # the reader went away (e.g. `log | head`): not an error worth a line
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (Exception, KeyboardInterrupt) as exc:
        code, message = exit_code(exc)
    print(f"smart-transfer: error: {one_line(message)}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
