"""What every command shares: the help formatter, the workspace option and JSON output."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from smart_transfer.cli.exits import EXIT_USAGE, CliError
from smart_transfer.protocol import InvalidToken, check_token

if TYPE_CHECKING:
    from smart_transfer.repo import Workspace

#: Environment variable holding the bearer token when --token is not given.
TOKEN_ENV = "SMART_TRANSFER_TOKEN"
T = TypeVar("T")
Commands = Any  # argparse's _SubParsersAction, which it does not export


class HelpFormatter(argparse.HelpFormatter):
    """Shows each option's default once, unless the help already says it or there is none."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if "default" in text or default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """argparse with a usage error of one line (``PROG: error: ...``) and exit 2, not the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_parser(commands: Commands, name: str, **options: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(name, formatter_class=HelpFormatter, **options)
    return parser


def dataset_name(text: str) -> str:
    """An argparse type: a dataset name, checked when the command line is read (a usage error before
    anything is opened or created)."""
    from smart_transfer.model import DatasetName, InvalidDatasetName

    try:
        return str(DatasetName(text))
    except InvalidDatasetName as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_dataset_argument(parser: argparse.ArgumentParser, **options: Any) -> None:
    """The DATASET positional argument, checked as a dataset name."""
    parser.add_argument("dataset", metavar="DATASET", type=dataset_name, **options)


def _directory_path(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path names no directory")
    return Path(text)


def add_workspace_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workspace",
        type=_directory_path,
        default=None,
        help="workspace directory (default: $SMART_TRANSFER_WORKSPACE or ./.smart-transfer/workspace)",
    )


def open_workspace(args: argparse.Namespace) -> Workspace:
    """The workspace the command writes to (created when missing)."""
    from smart_transfer.repo import Workspace

    return Workspace(args.workspace or Workspace.default_root())


def existing_workspace(args: argparse.Namespace, *, read_only: bool = False) -> Workspace:
    """The workspace a read-only command reads (WorkspaceNotFound when there is none). ``read_only``:
    without taking the index's lock, so the command runs while a pull or an ingest holds it."""
    from smart_transfer.repo import Workspace

    return Workspace.open_existing(args.workspace or Workspace.default_root(), read_only=read_only)


def serve_until_stopped(serve: Callable[[], None]) -> int:
    """Run a server until it stops (Ctrl-C is a normal stop); an address it cannot have is one line."""
    try:
        serve()
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        raise CliError(str(exc)) from None
    return 0


def add_token_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--token", default=None, help=f"bearer token (default: ${TOKEN_ENV})")


def token(args: argparse.Namespace) -> str | None:
    """The bearer token of --token or $SMART_TRANSFER_TOKEN, refused (exit 2) when it cannot be one."""
    value: str | None = args.token or os.environ.get(TOKEN_ENV)
    try:
        check_token(value)
    except InvalidToken as exc:
        source = "--token" if args.token else f"${TOKEN_ENV}"
        raise CliError(f"{source}: {exc}", EXIT_USAGE) from None
    return value


@contextmanager
def loading() -> Iterator[None]:
    """Import a command's libraries with the cyclic garbage collector paused, then freeze what they built.
    Importing the SDK makes some 30,000 objects (modules, classes, functions) that live until the process
    exits: the collector found no garbage among them but walked them over and over (about 10 ms of a
    0.2 s up-to-date pull). Frozen, the command's own collections skip them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def run(operation: Coroutine[Any, Any, T]) -> T:
    """Run an async SDK call to completion (asyncio loads only for the commands that need it)."""
    import asyncio

    return asyncio.run(operation)


def warn(text: str) -> None:
    """A warning line on standard error (the SDK's ``warn`` callback)."""
    print(f"smart-transfer: warning: {text}", file=sys.stderr)


def print_json(value: object) -> None:
    import orjson

    sys.stdout.write(orjson.dumps(value).decode() + "\n")


def print_rows(rows: list[dict[str, Any]], as_json: bool, empty: str, line: Callable[[dict[str, Any]], str]) -> None:
    """A listing: a JSON array, or one ``line`` per row (``empty`` when there is none)."""
    if as_json:
        print_json(rows)
    elif not rows:
        print(empty)
    for row in rows if not as_json else []:
        print(line(row))
