"""The ``smart-transfer`` command line. Every failure is one line on stderr and a non-zero exit:
1 error, 2 usage, 3 diverged or rejected (including a token that lacks the grant)."""

from __future__ import annotations

import sys

try:
    import argparse
    import gc
    import importlib
    import os
    from collections.abc import Callable, Sequence
    from typing import TYPE_CHECKING

    import smart_transfer
    from smart_transfer.cli.commands.common import Commands, Parser
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


#: Each command and the module of ``smart_transfer.cli.commands`` that registers it, in --help's order.
#: A command line naming one builds only that module's parsers: a pull does not import (or build) the
#: server's, the ingest's and a dozen other commands' options (tests/unit/test_startup.py checks the table).
COMMAND_MODULES = {
    "serve": "server",
    "token": "server",
    "gc": "server",
    "repack": "server",
    "add": "workspace",
    "log": "workspace",
    "list": "workspace",
    "diff": "diff",
    "ingest": "ingest",
    "pull": "transfer",
    "push": "transfer",
    "verify": "transfer",
    "drop": "drop",
    "peer": "peer",
    "remote": "remotes",
    "status": "remotes",
    "ls": "remotes",
    "tail": "data",
    "export": "data",
}


def _register(commands: Commands, module: str) -> None:
    register: Callable[[Commands], None] = importlib.import_module(f"smart_transfer.cli.commands.{module}").register
    register(commands)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every command's, or, when ``argv`` starts with a command's name, only
    the parsers of the module that registers it (what parsing ``argv`` needs)."""
    parser = Parser(
        prog="smart-transfer",
        description="Sync versioned datasets between local workspaces and a server on object storage.",
        epilog="Exit codes: 0 done, 1 error, 2 usage, 3 diverged or rejected (histories or grants).",
    )
    parser.add_argument("--version", action="version", version=f"smart-transfer {smart_transfer.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    named = COMMAND_MODULES.get(argv[0]) if argv else None
    # --version answers before any command is parsed: it needs none of them
    modules = [named] if named else [] if argv and argv[0] == "--version" else dict.fromkeys(COMMAND_MODULES.values())
    for module in modules:
        _register(commands, module)
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
        # only a failure pays for this import
        from smart_transfer.protocol.codes import REJECTIONS

        return (EXIT_REJECTED if exc.code in REJECTIONS else EXIT_ERROR), f"transfer refused: {exc}"
    if isinstance(exc, TransferFailed):
        return EXIT_ERROR, f"transfer failed: {exc}"
    return _lower_exit(exc)


def _sdk_exit(exc: SmartTransferError) -> int:
    # only a failure pays for this import
    from smart_transfer.protocol.codes import ErrorCode

    if exc.rejected:
        return EXIT_REJECTED
    #: codes that mean the command line itself was wrong when this side found them
    usage = not exc.remote and exc.code in (ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_DATASET_NAME)
    return EXIT_USAGE if usage else EXIT_ERROR


def _lower_exit(exc: BaseException) -> tuple[int, str]:
    """The exit of an error a lower layer raised past the SDK (the workspace's, the store's)."""
    # only a failure pays for these imports
    from smart_transfer.config import SettingError
    from smart_transfer.config.values import BadValue
    from smart_transfer.model import InvalidDatasetName, ModelError
    from smart_transfer.repo import HeadMoved, RepositoryError
    from smart_transfer.storage import StorageError

    if isinstance(exc, HeadMoved):
        return EXIT_REJECTED, str(exc)
    if isinstance(exc, InvalidDatasetName | SettingError | BadValue):
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
    # pydantic looks for plugins in every installed distribution's entry points the first time a model
    # validates (~20 ms, a tenth of an up-to-date pull); the command line uses none (a user may still
    # name the ones to skip, or "" for none, in this variable)
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = build_parser(argv).parse_args(argv)
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


def console() -> None:
    """The console script (and ``python -m smart_transfer.cli``): ``main`` as the process's exit status."""
    # the console's first step: the stand-ins are in place before any command imports
    from smart_transfer.cli.deferred import defer_unread_modules

    defer_unread_modules()
    code = main()
    # Everything the command built is garbage once it returns, and the interpreter's last collection at
    # exit would walk all of it: 30-40 ms, a sixth of an up-to-date pull. The command closed its files and
    # the index itself, so the objects are left frozen to the exit instead.
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    console()
