"""``pull``, ``push`` and ``verify``: the commands that talk to a server."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from smart_transfer.client.commands.common import (
    Commands,
    add_parser,
    add_token_option,
    add_workspace_option,
    existing_workspace,
    open_workspace,
    print_json,
    token,
    warn,
)
from smart_transfer.client.errors import EXIT_ERROR, EXIT_REJECTED, EXIT_USAGE, CliError
from smart_transfer.client.settings import DEFAULT_ANSWER_TIMEOUT, DEFAULT_KEEPALIVE_INTERVAL
from smart_transfer.transfer import limits
from smart_transfer.transfer.ratelimit import parse_rate

if TYPE_CHECKING:
    from smart_transfer.client.flow import TransferSummary

PROTOCOLS = ("smart", "simple")


def _rate(text: str) -> int:
    try:
        return parse_rate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
        _rate,
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
            + (" (simple protocol)" if summary.protocol == "simple" else "")
        )


def run_transfer(args: argparse.Namespace) -> int:
    from smart_transfer.client.progress import ProgressBar
    from smart_transfer.client.sdk import Client
    from smart_transfer.transfer.limits import LargeObjects, Timeouts

    if args.parallel < 1 or args.parallel_parts < 1:
        raise CliError("--parallel and --parallel-parts must be at least 1", EXIT_USAGE)
    bar = ProgressBar() if not args.json else None
    with open_workspace(args) as workspace:
        client = Client(
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
            large=LargeObjects(args.range_threshold, args.range_size, args.parallel_parts),
        )
        try:
            if args.command == "pull":
                summary = asyncio.run(client.pull(args.url, as_name=args.as_name, force=args.force))
            else:
                summary = asyncio.run(client.push(args.dataset, args.url, force=args.force))
        finally:
            if bar is not None:
                bar.finish()
    report(summary, args.json)
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from smart_transfer.client.verify import compare_remote, print_report, verify_local

    with existing_workspace(args) as workspace:
        report_, blocks = verify_local(workspace, args.dataset)
        if args.url:
            asyncio.run(compare_remote(report_, blocks, workspace, args.url, token(args)))
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
        type=_rate,
        default=limits.DEFAULT_RANGE_THRESHOLD,
        metavar="SIZE",
        help="pull objects larger than this as parallel ranged GETs, resumable range by range (e.g. 64M)",
    )
    large.add_argument(
        "--range-size", type=_rate, default=limits.DEFAULT_RANGE_SIZE, metavar="SIZE", help="size of those ranges"
    )
    add_token_option(parser)
    parser.add_argument(
        "--limit-rate",
        type=_rate,
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
