"""``pull``, ``push`` and ``verify``: the commands that talk to a server."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from smart_transfer.cli.commands.common import (
    Commands,
    add_dataset_argument,
    add_parser,
    add_token_option,
    add_workspace_option,
    existing_workspace,
    loading,
    open_workspace,
    print_json,
    run,
    token,
    warn,
)
from smart_transfer.cli.declared import add_settings, settings_from
from smart_transfer.cli.exits import EXIT_ERROR, EXIT_REJECTED, EXIT_USAGE, CliError
from smart_transfer.client.options import ClientOptions
from smart_transfer.config import declarations

if TYPE_CHECKING:
    from smart_transfer.client.client import Client
    from smart_transfer.client.flows.job import ProgressCallback
    from smart_transfer.client.flows.moving import TransferSummary
    from smart_transfer.model.selection import Selection
    from smart_transfer.repo import Workspace
    from smart_transfer.repo.repository import NewWorkspace

#: The options of pull and push, by group in --help (the rest: ClientOptions' own order).
LARGE_OBJECTS = ("parallel_parts", "range_threshold", "range_size")
BOUNDS = ("connect_timeout", "read_timeout", "attempts", "min_rate", "answer_timeout", "keepalive_interval")
#: The bounds of the commands that only ask the server (status, ls, verify).
ANSWER_BOUNDS = ("connect_timeout", "answer_timeout")


def client_options(args: argparse.Namespace, **fixed: Any) -> ClientOptions:
    """The options the command line gives (the rest: their defaults), checked (exit 2 when out of range)."""
    return settings_from(args, ClientOptions, None, **fixed)


def report(summary: TransferSummary, as_json: bool) -> None:
    if as_json:
        print_json(summary.to_dict())
    elif summary.note:
        print(f"{summary.dataset}: {summary.note}")
    elif summary.up_to_date:
        print(f"{summary.dataset}: up to date with {summary.remote} (head {summary.new_head})")
    else:
        print(
            f"{summary.dataset}: {summary.operation}ed {summary.blocks} block(s), "
            f"{summary.objects_transferred} object(s) ({summary.bytes_transferred} bytes) moved, "
            f"{summary.objects_skipped} skipped, in {summary.seconds:.2f} s; head {summary.new_head}"
            + (f" ({summary.objects_from_peers} object(s) from peers)" if summary.objects_from_peers else "")
            + (" (simple protocol)" if summary.protocol == "simple" else "")
        )


def _checked_options(args: argparse.Namespace) -> ClientOptions:
    """The command's options and arguments, checked before the workspace is opened (or created): a
    refused command leaves no trace."""
    from smart_transfer.client.client import Client
    from smart_transfer.model import DatasetName

    options = client_options(args, fallback=not args.no_fallback, peers=not getattr(args, "no_peers", False))
    token(args)  # a malformed token is refused here too, before the workspace is opened
    if args.command == "pull":
        if args.follow and options.protocol != "smart":
            raise CliError(
                "--follow needs the smart protocol (one WebSocket session); drop --protocol simple", EXIT_USAGE
            )
        Client.check_pull(args.url, args.as_name, args.announce, options.protocol)
        args.selection = _pull_selection(args)
    else:
        DatasetName(args.dataset)
        if args.url is not None:
            from smart_transfer.client.remote import RemoteDataset

            RemoteDataset.parse(args.url)
    return options


def _pull_selection(args: argparse.Namespace) -> Selection:
    """The flags' choice of objects (the one rule, ``model/versions.py``: exit 2 when bad)."""
    from smart_transfer.model.versions import pull_selection

    return pull_selection(
        all_checkpoints=args.all_checkpoints,
        state_only=args.state_only,
        blocks=args.blocks,
        since=args.since,
        last=args.last,
    )


def _client(
    args: argparse.Namespace, options: ClientOptions, workspace: Workspace, bar: ProgressCallback | None
) -> Client:
    from smart_transfer.cli.heap import FrozenHeap
    from smart_transfer.client.client import Client

    return Client(workspace, options, token=token(args), progress=bar, warn=warn, heap=FrozenHeap())


def _workspace(args: argparse.Namespace) -> Workspace:
    """Only a pull from a URL may create the workspace: a pull by name needs the dataset's remote, and a
    push the dataset, both in an existing workspace (so a refused one leaves nothing behind)."""
    from smart_transfer.client.remote import is_url

    if args.command == "pull" and is_url(args.url):
        return open_workspace(args)
    return existing_workspace(args)


def run_transfer(args: argparse.Namespace) -> int:
    with loading():
        options = _checked_options(args)  # loads the SDK
    created = _new_workspace(args)
    try:
        if args.command == "pull" and args.follow:
            return run_follow(args, options)
        return _transfer(args, options)
    except BaseException:
        if created is not None:  # a refused or unreachable first pull leaves nothing behind
            created.discard_unless_used()
        raise


def _new_workspace(args: argparse.Namespace) -> NewWorkspace | None:
    """The workspace a pull from a URL is about to create, if it is one (see ``_workspace``)."""
    from smart_transfer.client.remote import is_url
    from smart_transfer.repo import Workspace
    from smart_transfer.repo.repository import NewWorkspace

    if args.command != "pull" or not is_url(args.url):
        return None
    return NewWorkspace.at(args.workspace or Workspace.default_root())


def _transfer(args: argparse.Namespace, options: ClientOptions) -> int:
    from smart_transfer.cli.progress import ProgressBar

    bar = ProgressBar() if not args.json else None
    with _workspace(args) as workspace:
        client = _client(args, options, workspace, bar)
        try:
            if args.command == "pull":
                pulling = client.pull(
                    args.url,
                    as_name=args.as_name,
                    force=args.force,
                    announce=args.announce,
                    selection=args.selection,
                )
                summary = run(pulling)
            else:
                summary = run(client.push(args.dataset, args.url, force=args.force))
        finally:
            if bar is not None:
                bar.finish()
    report(summary, args.json)
    return 0


def run_follow(args: argparse.Namespace, options: ClientOptions) -> int:
    """``pull --follow``: one line per update (the first pull's too) until Ctrl-C, which ends the session
    cleanly after any increment in flight; a second Ctrl-C stops at once (nothing half-done is kept)."""
    import asyncio  # loaded here, not at start-up (see tests/unit/test_startup.py)
    import signal

    def update(summary: TransferSummary) -> None:
        report(summary, args.json)
        sys.stdout.flush()

    async def follow(client: Client) -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def interrupted() -> None:
            stop.set()
            loop.remove_signal_handler(signal.SIGINT)  # a second Ctrl-C interrupts at once

        loop.add_signal_handler(signal.SIGINT, interrupted)
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        pulling = client.follow(
            args.url,
            update,
            stop,
            as_name=args.as_name,
            force=args.force,
            announce=args.announce,
            selection=args.selection,
        )
        return await pulling

    with _workspace(args) as workspace:
        updates = asyncio.run(follow(_client(args, options, workspace, None)))
    if not args.json:
        print(f"stopped following after {updates} update(s)", flush=True)
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from smart_transfer.client.client import Client
    from smart_transfer.client.inspection.verify import print_report

    options, bearer = client_options(args), token(args)
    with existing_workspace(args, read_only=True) as workspace:  # quarantine moves files, never the index
        report_ = run(Client(workspace, options, token=bearer, warn=warn).verify(args.dataset, args.url))
    if args.json:
        print_json(report_.to_dict())
    else:
        print_report(report_)
    if report_.problems:
        return EXIT_ERROR
    return EXIT_REJECTED if report_.relation == "diverged" else 0


def _add_transfer_options(parser: argparse.ArgumentParser, force_help: str) -> None:
    parser.add_argument("--force", action="store_true", help=force_help)
    grouped = (*LARGE_OBJECTS, *BOUNDS)
    ungrouped = [name for name, _, _ in declarations(ClientOptions) if name not in grouped]
    add_settings(parser, ClientOptions, None, only=ungrouped)
    add_settings(parser.add_argument_group("large objects"), ClientOptions, None, only=LARGE_OBJECTS)
    add_token_option(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON summary object instead of text")
    parser.add_argument(
        "--no-fallback",
        action="store_true",
        help="fail instead of falling back to the simple protocol when storage is unreachable",
    )
    add_settings(parser.add_argument_group("bounds (every wait ends)"), ClientOptions, None, only=BOUNDS)
    add_workspace_option(parser)


def _register_pull(commands: Commands) -> None:
    pull = add_parser(
        commands,
        "pull",
        help="pull a dataset from a server into the workspace",
        description="Bring a local dataset up to the remote head. Blocks travel in one WebSocket session; "
        "objects are downloaded directly from storage in parallel and verified before the local head moves. "
        "Re-running an interrupted pull resumes it. The first URL a dataset is pulled from or pushed to becomes "
        "its remote (see `remote`). By default a pull moves every block, every checkpoint's manifest and every data "
        "slice, but only the files of the latest checkpoint, the one a reader restores state from: older "
        "checkpoints' files are absent by choice (`status` and `verify` say so) until `--all-checkpoints` asks "
        "for them. `--state-only`, `--blocks`, `--since` or `--last` move only part of the data slices (the chain "
        "stays whole and verified); the workspace remembers the choice, and a wider pull later moves only "
        "the difference. `--follow` keeps the choice for every update.",
    )
    pull.add_argument(
        "url",
        metavar="URL|DATASET",
        help="http(s)://HOST:PORT/DATASET, or the name of a workspace dataset to pull from its remote",
    )
    pull.add_argument("--as", dest="as_name", default=None, help="local dataset name (default: the remote name)")
    pull.add_argument(
        "--follow",
        action="store_true",
        help="stay in sync: after catching up, keep the session open and pull every new head as it is pushed, "
        "one line per update, until Ctrl-C (smart protocol only); after each update the files that fell out of "
        "the choice are dropped, so the disk stays bounded: slices outside a range, and the previous latest "
        "checkpoint's files unless --all-checkpoints (only what the server holds)",
    )
    pull.add_argument(
        "--announce",
        metavar="PEER_URL",
        default=None,
        help="tell the server that `peer serve` at PEER_URL serves this workspace's objects, so other readers of "
        "the dataset fetch them from there (smart protocol only)",
    )
    pull.add_argument(
        "--all-checkpoints",
        action="store_true",
        help="also move the files of every older checkpoint of the chain, those earlier pulls left out included "
        "(default: only the latest checkpoint's files; older checkpoints' blocks and manifests are always pulled "
        "and verified, but nothing restores from them, so their files would cost bytes nobody reads)",
    )
    _add_range_options(pull.add_argument_group("part of the data (at most one; default: every data slice)"))
    pull.add_argument(
        "--no-peers", action="store_true", help="never fetch objects from peers the server lists; storage only"
    )
    _add_transfer_options(pull, "replace the local history when it diverged from the remote one (same Seed only)")
    pull.set_defaults(handler=run_transfer)


def _add_range_options(group: argparse._ArgumentGroup) -> None:
    """``pull``'s choice of data slices; every one by default, because a reader of the data needs them
    all and a pull then moves only what the workspace lacks."""
    group.add_argument(
        "--state-only",
        action="store_true",
        help="move no data slices: the whole chain and the latest checkpoint's files only, to restore state "
        "(then `ingest` continues from it and `push` works); a later plain pull brings the data",
    )
    group.add_argument(
        "--blocks",
        metavar="FIRST-LAST",
        default=None,
        help="only the slices added by these blocks (sequence numbers, inclusive, either end may be left out, "
        "as `export --blocks` takes them; past the remote head: refused)",
    )
    group.add_argument(
        "--since",
        metavar="TIME",
        default=None,
        help="only the slices added by blocks whose system time is at or after TIME (e.g. 2026-01-31 or "
        "2026-01-31T12:00:00Z; UTC unless it names a zone; not in the future)",
    )
    group.add_argument(
        "--last",
        metavar="N",
        default=None,
        help="only the slices holding the last N records (1 or more; a slice with any of them moves whole)",
    )


def register(commands: Commands) -> None:
    _register_pull(commands)
    push = add_parser(
        commands,
        "push",
        help="push a workspace dataset to a server",
        description="Make the remote dataset's head the local head. Objects are uploaded directly to storage; "
        "the server verifies every one (size and MD5) before it moves the remote head. Objects the server "
        "already has are never uploaded again.",
    )
    add_dataset_argument(push)
    push.add_argument(
        "url", metavar="URL", nargs="?", default=None, help="http(s)://HOST:PORT/DATASET (default: its remote)"
    )
    _add_transfer_options(push, "replace the remote history when it diverged from the local one (same Seed only)")
    push.set_defaults(handler=run_transfer)

    verify = add_parser(
        commands,
        "verify",
        help="re-check a local dataset, and compare it with a remote one",
        description="Re-check the chain rules and every block's and object's hash and size. Corrupt objects "
        "are moved to quarantine and named; the next pull fetches them again. Given URL, compare with the remote "
        "head: equal heads mean equal datasets, otherwise it says where the histories part. "
        "Exit: 0 whole, 1 problems found, 3 diverged.",
    )
    add_dataset_argument(verify)
    verify.add_argument("url", metavar="URL", nargs="?", default=None, help="http(s)://HOST:PORT/DATASET")
    add_token_option(verify)
    verify.add_argument("--json", action="store_true", help="print one JSON report")
    add_settings(verify, ClientOptions, None, only=("parallel", *ANSWER_BOUNDS))
    add_workspace_option(verify)
    verify.set_defaults(handler=run_verify)
