"""``drop``: delete local object files a workspace dataset no longer keeps (a bounded reader's disk), the
narrower choice recorded first; never the server's, never what a later push needs unless the server holds
it (``client/flows/drop.py``)."""

from __future__ import annotations

import argparse

from smart_transfer.cli.commands.common import (
    Commands,
    add_dataset_argument,
    add_parser,
    add_workspace_option,
    existing_workspace,
    loading,
    print_json,
    run,
)


def run_drop(args: argparse.Namespace) -> int:
    with loading():
        from smart_transfer.client.client import Client
        from smart_transfer.client.flows.drop import drop_selection
        from smart_transfer.model.selection import EVERYTHING

    choice = {
        "older_checkpoints": args.older_checkpoints,
        "state_only": args.state_only,
        "blocks": args.blocks,
        "since": args.since,
        "last": args.last,
    }
    drop_selection(EVERYTHING, **choice)  # a bad choice is refused before the workspace is opened
    with existing_workspace(args) as workspace:  # for writing: its lock keeps pulls and ingests out meanwhile
        report = run(Client(workspace).drop(args.dataset, dry_run=args.dry_run, **choice))
    if args.json:
        print_json(report.to_dict())
    else:
        print(report.describe())
    return 0


def register(commands: Commands) -> None:
    drop = add_parser(
        commands,
        "drop",
        help="delete local object files a dataset no longer keeps (never the server's)",
        description="Delete the local files of a workspace dataset outside what it keeps: the data slices outside "
        "one range (--state-only, --blocks, --since, --last, as `pull` takes them; the range replaces the one the "
        "workspace recorded) and/or, with --older-checkpoints, the files of every checkpoint but the latest. The "
        "narrower choice is recorded first, so `status` says partial, `verify` stays clean and reads name what is "
        "absent; a later pull with a wider range fetches it again. Never deletes the server's copy, nor the objects "
        "of blocks after the remote head (a later push needs them); a dataset with no remote is refused. A drop only "
        "narrows: a range that wants what the workspace left out is refused (pull it first).",
    )
    add_dataset_argument(drop)
    group = drop.add_argument_group("what to keep (at least one; what is not named stays as recorded)")
    group.add_argument(
        "--state-only", action="store_true", help="keep no data slices (the chain and the latest checkpoint stay)"
    )
    group.add_argument(
        "--blocks", metavar="FIRST-LAST", default=None, help="keep the slices added by these blocks (inclusive)"
    )
    group.add_argument(
        "--since",
        metavar="TIME",
        default=None,
        help="keep the slices of blocks whose system time is at or after TIME (UTC unless it names a zone)",
    )
    group.add_argument("--last", metavar="N", default=None, help="keep the slices holding the last N records")
    group.add_argument(
        "--older-checkpoints",
        action="store_true",
        help="drop the files of every checkpoint but the latest (the one a reader restores)",
    )
    drop.add_argument(
        "--dry-run",
        action="store_true",
        help="only say how many objects and bytes would go; nothing is recorded or deleted",
    )
    drop.add_argument("--json", action="store_true", help="print one JSON report")
    add_workspace_option(drop)
    drop.set_defaults(handler=run_drop)
