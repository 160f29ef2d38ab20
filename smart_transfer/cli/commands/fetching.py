"""``--fetch`` on the reading commands (``tail``, ``export``, ``diff``): slices a partial workspace left
out by choice are fetched on demand from the dataset's remote (``Client.fetch``: a pull with the recorded
selection widened, verified and stored like any pull) instead of the read failing with the one line that
names them and the pull that gets them. Off by default: a read never goes to the network unless asked."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from smart_transfer.cli.commands.common import add_token_option, existing_workspace, run, token, warn

if TYPE_CHECKING:
    from smart_transfer.model.selection import Selection
    from smart_transfer.reading.absent import FetchAbsent


def add_fetch_options(parser: argparse.ArgumentParser) -> None:
    """``--fetch`` and the token it uses."""
    parser.add_argument(
        "--fetch",
        action="store_true",
        help="fetch the slices this partial workspace left out by choice from the dataset's remote before reading "
        "them (a pull of just those slices, verified and stored like any pull; the workspace then records the wider "
        "range). Default: off, a read never goes to the network unless asked; it fails with one line naming the "
        "absent blocks and the pull that gets them",
    )
    add_token_option(parser)


def fetcher(args: argparse.Namespace) -> FetchAbsent | None:
    """What a read calls to fetch absent slices (None without ``--fetch``); the token is checked now."""
    if not args.fetch:
        return None
    bearer = token(args)

    def fetch(name: str, selection: Selection) -> None:
        # the loads happen only when something is absent
        from smart_transfer.client.client import Client

        with existing_workspace(args) as workspace:  # a pull writes: it takes the index's lock
            run(Client(workspace, token=bearer, warn=warn).fetch(name, selection))

    return fetch
