"""``remote``, ``status`` and ``ls``: where datasets sync with, how they relate to it, and what a
server holds."""

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
    print_rows,
    run,
    token,
    warn,
)
from smart_transfer.cli.commands.data import print_table
from smart_transfer.cli.commands.transfer import ANSWER_BOUNDS, client_options
from smart_transfer.cli.declared import add_settings
from smart_transfer.cli.exits import EXIT_REJECTED, CliError
from smart_transfer.client.options import ClientOptions

if TYPE_CHECKING:
    from smart_transfer.protocol.rest import DatasetInfo


def run_remote_list(args: argparse.Namespace) -> int:
    with existing_workspace(args, read_only=True) as workspace:
        rows = []
        for name, url in workspace.remotes.items():
            if args.dataset is not None and name != args.dataset:
                continue
            seen = workspace.dataset(name).remote_head(url)
            rows.append({"dataset": str(name), "remote": url, "last_seen_head": str(seen) if seen else None})
    print_rows(
        rows,
        args.json,
        f"no remote for {args.dataset}" if args.dataset else "no dataset has a remote",
        lambda row: (
            f"{row['dataset']}  {row['remote']}"
            + (f"  (last seen head {row['last_seen_head']})" if row["last_seen_head"] else "")
        ),
    )
    return 0


def run_remote_set(args: argparse.Namespace) -> int:
    from smart_transfer.client.remote import RemoteDataset
    from smart_transfer.model import DatasetName

    remote = RemoteDataset.parse(args.url)
    name = DatasetName(args.dataset)
    with open_workspace(args) as workspace:
        workspace.remotes.set(name, remote.url)
    print(f"{name}: remote is {remote.url}")
    return 0


def run_remote_remove(args: argparse.Namespace) -> int:
    from smart_transfer.model import DatasetName

    name = DatasetName(args.dataset)
    with existing_workspace(args) as workspace:
        if not workspace.remotes.remove(name):
            raise CliError(f"{name} has no remote")
    print(f"{name}: remote removed")
    return 0


def run_status(args: argparse.Namespace) -> int:
    with loading():
        from smart_transfer.client.client import Client
        from smart_transfer.client.inspection.status import DIVERGED

    options, bearer = client_options(args), token(args)
    with existing_workspace(args, read_only=True) as workspace:
        client = Client(workspace, options, token=bearer, warn=warn)
        status = run(client.status(args.dataset, args.url))
    if args.json:
        print_json(status.to_dict())
    else:
        local = f"head {status.head}, {status.blocks} block(s), {status.records} record(s)" if status.head else "none"
        print(f"{status.dataset}: {status.describe()}")
        print(f"  local:  {local}")
        remote = f"head {status.remote_head}, {status.remote_blocks} block(s), {status.remote_records} record(s)"
        print(f"  remote: {status.remote}" + (f" ({remote})" if status.remote_head else ""))
        if status.partial is not None:
            print(f"  {status.partial.describe(status.dataset)}")
    return EXIT_REJECTED if status.relation == DIVERGED else 0


def run_ls(args: argparse.Namespace) -> int:
    return run(_ls(args))


async def _ls(args: argparse.Namespace) -> int:
    """Rows as each page of the server's listing arrives (one table; its columns widen when a later page
    needs it), or one JSON array written as it grows (the bytes of ``print_json`` of the whole list)."""
    import orjson

    from smart_transfer.client.client import Client

    client = Client(None, client_options(args), token=token(args), warn=warn)
    widths: list[int] | None = None
    shown = 0
    for_json = "["
    async for datasets in client.dataset_pages(args.url):
        if args.json:
            for info in datasets:
                sys.stdout.write(for_json + orjson.dumps(info.model_dump(mode="json", exclude={"block"})).decode())
                for_json = ","
        elif datasets:
            widths = print_table(LS_COLUMNS, [_ls_row(info) for info in datasets], whole=("name", "head"), after=widths)
        shown += len(datasets)
        sys.stdout.flush()
    if args.json:
        sys.stdout.write("[]\n" if for_json == "[" else "]\n")
    elif not shown:
        print("no datasets (or none this token may read)")
    return 0


LS_COLUMNS = ["name", "head", "blocks", "records", "bytes"]


def _ls_row(info: DatasetInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "head": info.head,
        "blocks": info.blocks,
        "records": info.records,
        "bytes": info.data.bytes + info.checkpoints.bytes,
    }


def _register_remote(commands: Commands) -> None:
    remote = add_parser(
        commands,
        "remote",
        help="show, set or remove the remote a dataset syncs with",
        description="A dataset remembers the first URL it is pulled from or pushed to; `pull DATASET`, "
        "`push DATASET` and `status DATASET` use it when no URL is given.",
    )
    actions = remote.add_subparsers(dest="remote_command", metavar="ACTION", required=True)
    listing = add_parser(actions, "list", help="each dataset's remote")
    add_dataset_argument(listing, nargs="?", default=None, help="only this dataset")
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    listing.set_defaults(handler=run_remote_list)
    setting = add_parser(actions, "set", help="set (or replace) a dataset's remote")
    add_dataset_argument(setting)
    setting.add_argument("url", metavar="URL", help="http(s)://HOST:PORT/DATASET")
    setting.set_defaults(handler=run_remote_set)
    removing = add_parser(actions, "remove", help="forget a dataset's remote")
    add_dataset_argument(removing)
    removing.set_defaults(handler=run_remote_remove)
    for parser in (listing, setting, removing):
        add_workspace_option(parser)


def register(commands: Commands) -> None:
    _register_remote(commands)
    status = add_parser(
        commands,
        "status",
        help="compare a dataset with its remote: same, ahead, behind or diverged",
        description="Compare a workspace dataset with its remote (or URL) in one request; nothing is transferred. "
        "Exit: 0 same, ahead, behind or no remote dataset; 3 diverged.",
    )
    add_dataset_argument(status)
    status.add_argument("url", metavar="URL", nargs="?", default=None, help="default: the dataset's remote")
    add_token_option(status)
    status.add_argument("--json", action="store_true", help="print one JSON object")
    add_settings(status, ClientOptions, None, only=ANSWER_BOUNDS)
    add_workspace_option(status)
    status.set_defaults(handler=run_status)

    ls = add_parser(
        commands,
        "ls",
        help="list the datasets on a server",
        description="List the datasets the token may read on the server at URL: head, blocks, records and bytes.",
    )
    ls.add_argument("url", metavar="URL", help="http(s)://HOST:PORT[/PREFIX] of the server")
    add_token_option(ls)
    ls.add_argument("--json", action="store_true", help="print a JSON array")
    add_settings(ls, ClientOptions, None, only=ANSWER_BOUNDS)
    ls.set_defaults(handler=run_ls)
