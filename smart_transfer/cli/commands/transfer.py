"""``pull``, ``push`` and ``verify``: the commands that talk to a server."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from smart_transfer.cli.commands.common import (
    Commands,
    add_parser,
    add_token_option,
    add_workspace_option,
    existing_workspace,
    open_workspace,
    print_json,
    rate,
    run,
    token,
    warn,
)
from smart_transfer.cli.exits import EXIT_ERROR, EXIT_REJECTED, EXIT_USAGE, CliError
from smart_transfer.client.options import DEFAULT_ANSWER_TIMEOUT, DEFAULT_KEEPALIVE_INTERVAL
from smart_transfer.transfer import limits

if TYPE_CHECKING:
    from smart_transfer.client.client import Client
    from smart_transfer.client.flows.moving import ProgressCallback, TransferSummary
    from smart_transfer.repo import Workspace

PROTOCOLS = ("smart", "simple")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be more than 0 seconds")
    return value


def _attempts(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a number of attempts (1 or more): {text!r}")
    return int(text)


#: The bounds of every wait of pull and push: (flag, type, default, help).
BOUNDS: list[tuple[str, Callable[[str], object], object, str]] = [
    ("--connect-timeout", _seconds, limits.DEFAULT_CONNECT_TIMEOUT, "seconds to open a connection"),
    (
        "--read-timeout",
        _seconds,
        limits.DEFAULT_READ_TIMEOUT,
        "seconds storage may send nothing before a transfer attempt counts as stalled",
    ),
    ("--attempts", _attempts, limits.DEFAULT_ATTEMPTS, "attempts per object (stalls, network errors, 5xx)"),
    (
        "--min-rate",
        rate,
        limits.DEFAULT_MIN_RATE,
        "slowest rate an object may move at: one attempt lasts at most the two timeouts + size / this rate",
    ),
    (
        "--answer-timeout",
        _seconds,
        DEFAULT_ANSWER_TIMEOUT,
        "seconds to wait for any one answer of the server (its keep-alives reset it)",
    ),
    (
        "--keepalive-interval",
        _seconds,
        DEFAULT_KEEPALIVE_INTERVAL,
        "seconds between the keep-alives the client sends while objects move",
    ),
]


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


def _client(args: argparse.Namespace, workspace: Workspace, bar: ProgressCallback | None) -> Client:
    from smart_transfer.client.client import Client
    from smart_transfer.transfer.limits import LargeObjects, Timeouts

    if args.parallel < 1 or args.parallel_parts < 1:
        raise CliError("--parallel and --parallel-parts must be at least 1", EXIT_USAGE)
    return Client(
        workspace,
        token=token(args),
        parallel=args.parallel,
        progress=bar,
        limit_rate=args.limit_rate,
        protocol=args.protocol,
        fallback=not args.no_fallback,
        warn=warn,
        timeouts=Timeouts(args.connect_timeout, args.read_timeout, args.attempts, args.min_rate),
        answer_timeout=args.answer_timeout,
        keepalive_interval=args.keepalive_interval,
        peers=not getattr(args, "no_peers", False),
        large=LargeObjects(args.range_threshold, args.range_size, args.parallel_parts),
    )


def run_transfer(args: argparse.Namespace) -> int:
    from smart_transfer.cli.progress import ProgressBar

    if args.command == "pull" and args.follow:
        return run_follow(args)
    bar = ProgressBar() if not args.json else None
    with open_workspace(args) as workspace:
        client = _client(args, workspace, bar)
        try:
            if args.command == "pull":
                pulling = client.pull(args.url, as_name=args.as_name, force=args.force, announce=args.announce)
                summary = run(pulling)
            else:
                summary = run(client.push(args.dataset, args.url, force=args.force))
        finally:
            if bar is not None:
                bar.finish()
    report(summary, args.json)
    return 0


def run_follow(args: argparse.Namespace) -> int:
    """``pull --follow``: one line per update (the first pull's too) until Ctrl-C, which ends the session
    cleanly after any increment in flight; a second Ctrl-C stops at once (nothing half-done is kept)."""
    if args.protocol != "smart":
        raise CliError("--follow needs the smart protocol (one WebSocket session); drop --protocol simple", EXIT_USAGE)
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
        pulling = client.follow(args.url, update, stop, as_name=args.as_name, force=args.force, announce=args.announce)
        return await pulling

    with open_workspace(args) as workspace:
        updates = asyncio.run(follow(_client(args, workspace, None)))
    if not args.json:
        print(f"stopped following after {updates} update(s)", flush=True)
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from smart_transfer.client.inspection.verify import compare_remote, print_report, verify_local

    with existing_workspace(args) as workspace:
        report_, blocks = verify_local(workspace, args.dataset)
        if args.url:
            run(compare_remote(report_, blocks, workspace, args.url, token(args)))
    if args.json:
        print_json(report_.to_dict())
    else:
        print_report(report_)
    if report_.problems:
        return EXIT_ERROR
    return EXIT_REJECTED if report_.relation == "diverged" else 0


def _add_transfer_options(parser: argparse.ArgumentParser, force_help: str) -> None:
    parser.add_argument("--force", action="store_true", help=force_help)
    parser.add_argument("--parallel", type=int, default=limits.DEFAULT_PARALLEL, help="concurrent object transfers")
    large = parser.add_argument_group("large objects")
    large.add_argument(
        "--parallel-parts",
        type=int,
        default=limits.DEFAULT_PARALLEL_PARTS,
        help="ranges (pull) or parts (push) of one large object in flight at once, within --parallel",
    )
    large.add_argument(
        "--range-threshold",
        type=rate,
        default=limits.DEFAULT_RANGE_THRESHOLD,
        metavar="SIZE",
        help="pull objects larger than this as parallel ranged GETs, resumable range by range (e.g. 64M)",
    )
    large.add_argument(
        "--range-size", type=rate, default=limits.DEFAULT_RANGE_SIZE, metavar="SIZE", help="size of those ranges"
    )
    add_token_option(parser)
    parser.add_argument(
        "--limit-rate",
        type=rate,
        default=None,
        metavar="RATE",
        help="global bandwidth limit for object transfers, e.g. 500K or 10M (bytes/s; default: unlimited)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON summary object instead of text")
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="smart",
        help="smart: one WebSocket session, objects moved directly to/from storage; "
        "simple: plain REST (one request per block)",
    )
    parser.add_argument(
        "--no-fallback",
        action="store_true",
        help="fail instead of falling back to the simple protocol when storage is unreachable",
    )
    bounds = parser.add_argument_group("bounds (every wait ends)")
    for flag, kind, default, text in BOUNDS:
        bounds.add_argument(flag, type=kind, default=default, help=text)
    add_workspace_option(parser)


def register(commands: Commands) -> None:
    pull = add_parser(
        commands,
        "pull",
        help="pull a dataset from a server into the workspace",
        description="Bring a local dataset up to the remote head. Blocks travel in one WebSocket session; "
        "objects are downloaded directly from storage in parallel and verified before the local head moves. "
        "Re-running an interrupted pull resumes it. The first URL a dataset is pulled from or pushed to becomes "
        "its remote (see `remote`).",
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
        "one line per update, until Ctrl-C (smart protocol only)",
    )
    pull.add_argument(
        "--announce",
        metavar="PEER_URL",
        default=None,
        help="tell the server that `peer serve` at PEER_URL serves this workspace's objects, so other readers of "
        "the dataset fetch them from there (smart protocol only)",
    )
    pull.add_argument(
        "--no-peers", action="store_true", help="never fetch objects from peers the server lists; storage only"
    )
    _add_transfer_options(pull, "replace the local history when it diverged from the remote one (same Seed only)")
    pull.set_defaults(handler=run_transfer)

    push = add_parser(
        commands,
        "push",
        help="push a workspace dataset to a server",
        description="Make the remote dataset's head the local head. Objects are uploaded directly to storage; "
        "the server verifies every one (size and MD5) before it moves the remote head. Objects the server "
        "already has are never uploaded again.",
    )
    push.add_argument("dataset", metavar="DATASET")
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
    verify.add_argument("dataset", metavar="DATASET")
    verify.add_argument("url", metavar="URL", nargs="?", default=None, help="http(s)://HOST:PORT/DATASET")
    add_token_option(verify)
    verify.add_argument("--json", action="store_true", help="print one JSON report")
    add_workspace_option(verify)
    verify.set_defaults(handler=run_verify)
