"""``peer serve``: share a workspace's objects with other clients' pulls (see smart_transfer/peer)."""

from __future__ import annotations

import argparse
import sys

from smart_transfer.cli.commands.common import Commands, add_parser, add_workspace_option, serve_until_stopped
from smart_transfer.cli.declared import add_settings, settings_from
from smart_transfer.peer import settings as defaults
from smart_transfer.server.settings import LOOPBACK_HOSTS


def run_peer_serve(args: argparse.Namespace) -> int:
    from smart_transfer.peer.runner import serve
    from smart_transfer.repo import Workspace

    settings = settings_from(args, defaults.PeerSettings, None, workspace=args.workspace or Workspace.default_root())
    if settings.host not in LOOPBACK_HOSTS:
        print(
            f"smart-transfer: warning: serving on {settings.host}: anyone who reaches it and knows an object's hash "
            "can read that object",
            file=sys.stderr,
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
    add_settings(serve, defaults.PeerSettings, None)
    add_workspace_option(serve)
    serve.set_defaults(handler=run_peer_serve)
