"""``peer serve``: share a workspace's objects with other clients' pulls (see smart_transfer/peer)."""

from __future__ import annotations

import argparse
import sys

from smart_transfer.cli.commands.common import Commands, add_parser, add_workspace_option, rate, serve_until_stopped
from smart_transfer.cli.exits import EXIT_USAGE, CliError
from smart_transfer.peer import settings as defaults
from smart_transfer.server.settings import LOOPBACK_HOSTS


def run_peer_serve(args: argparse.Namespace) -> int:
    from smart_transfer.peer.runner import serve
    from smart_transfer.repo import Workspace

    if args.max_transfers < 1 or args.retry_after < 1:
        raise CliError("--max-transfers and --retry-after must be at least 1", EXIT_USAGE)
    if args.host not in LOOPBACK_HOSTS:
        print(
            f"smart-transfer: warning: serving on {args.host}: anyone who reaches it and knows an object's hash "
            "can read that object",
            file=sys.stderr,
        )
    settings = defaults.PeerSettings(
        workspace=args.workspace or Workspace.default_root(),
        host=args.host,
        port=args.port,
        max_transfers=args.max_transfers,
        retry_after=args.retry_after,
        limit_rate=args.limit_rate,
    )
    return serve_until_stopped(lambda: serve(settings))


def register(commands: Commands) -> None:
    peer = add_parser(commands, "peer", help="share a workspace's objects with other clients (peer-to-peer pulls)")
    actions = peer.add_subparsers(dest="peer_command", metavar="ACTION", required=True)
    serve = add_parser(
        actions,
        "serve",
        help="serve the workspace's objects read-only over HTTP",
        description="Serve the objects of this workspace read-only over HTTP, by kind and hash, so that other "
        "clients' pulls fetch them from here instead of storage. Tell the server with `pull --announce URL` "
        "(the URL this prints); it lists the peer to readers of the dataset for --peer-ttl. Clients verify every "
        "object they get and fall back to storage; this process never changes the workspace.",
    )
    serve.add_argument("--host", default=defaults.DEFAULT_PEER_HOST, help="address to bind")
    serve.add_argument("--port", type=int, default=defaults.DEFAULT_PEER_PORT, help="port to bind (0: any free port)")
    serve.add_argument(
        "--max-transfers",
        type=int,
        default=defaults.DEFAULT_PEER_MAX_TRANSFERS,
        help="objects sent at once; more are answered 429 Busy with Retry-After",
    )
    serve.add_argument(
        "--retry-after", type=int, default=defaults.DEFAULT_PEER_RETRY_AFTER, help="seconds a busy answer asks to wait"
    )
    serve.add_argument(
        "--limit-rate",
        type=rate,
        default=None,
        metavar="RATE",
        help="bandwidth limit for all transfers together, e.g. 500K or 10M (default: unlimited)",
    )
    add_workspace_option(serve)
    serve.set_defaults(handler=run_peer_serve)
