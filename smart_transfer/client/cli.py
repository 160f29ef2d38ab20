"""The ``smart-transfer`` command line. Every failure is one line on stderr and a non-zero exit:
1 error, 2 usage, 3 diverged or rejected."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson

import smart_transfer
from smart_transfer.client.errors import EXIT_ERROR, EXIT_REJECTED, EXIT_USAGE, CliError
from smart_transfer.client.progress import ProgressBar
from smart_transfer.client.sdk import PROTOCOLS, Client, DivergedError, RemoteError, TransferSummary
from smart_transfer.ingest.command import register as register_ingest
from smart_transfer.model import AddData, DataSlice, ModelError, OffsetInterval, decode_block
from smart_transfer.protocol.errors import REJECTIONS
from smart_transfer.repo import DatasetNotFound, HeadMoved, RepositoryError, Workspace
from smart_transfer.repo.layout import ObjectKind, object_key
from smart_transfer.server import settings as server_defaults
from smart_transfer.server.settings import ServerSettings
from smart_transfer.storage import StorageError
from smart_transfer.storage.base import DEFAULT_URL_TTL_SECONDS
from smart_transfer.transfer.hashing import digest_file
from smart_transfer.transfer.http import DEFAULT_PARALLEL, TransferFailed
from smart_transfer.transfer.ratelimit import parse_rate

Handler = Callable[[argparse.Namespace], int]
#: Environment variable holding the bearer token when --token is not given.
TOKEN_ENV = "SMART_TRANSFER_TOKEN"


def _workspace(args: argparse.Namespace) -> Workspace:
    """The workspace the command works on."""
    return Workspace(args.workspace or Workspace.default_root())


def cmd_serve(args: argparse.Namespace) -> int:
    from smart_transfer.server.runner import serve
    from smart_transfer.server.settings import ServerSettings

    if (args.s3_endpoint or args.s3_prefix) and not args.s3_bucket:
        raise CliError("--s3-endpoint and --s3-prefix need --s3-bucket", EXIT_USAGE)
    if args.url_ttl < 1:
        raise CliError("--url-ttl must be at least 1 second", EXIT_USAGE)
    settings = ServerSettings(
        host=args.host,
        port=args.port,
        root=Path(args.root),
        public_url=args.public_url,
        s3_endpoint=args.s3_endpoint,
        s3_public_endpoint=args.s3_public_endpoint,
        s3_bucket=args.s3_bucket,
        s3_prefix=args.s3_prefix or "",
        url_ttl_seconds=args.url_ttl,
        max_objects_per_page=args.max_objects_per_page,
        idle_timeout_seconds=args.idle_timeout,
        max_message_bytes=args.max_message_bytes,
        session_timeout_seconds=args.session_timeout,
        max_sessions=args.max_sessions,
        max_sessions_per_token=args.max_sessions_per_token,
        max_requests=args.max_requests,
        max_requests_per_token=args.max_requests_per_token,
        tokens_file=Path(args.tokens) if args.tokens else None,
        allow_anonymous=args.allow_anonymous,
    )
    try:
        settings.check_exposure()
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    try:
        serve(settings)
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        raise CliError(str(exc)) from None
    return 0


def cmd_token_add(args: argparse.Namespace) -> int:
    from smart_transfer.server.auth import add_token

    if not args.read and not args.write:
        raise CliError("give at least one --read or --write pattern", EXIT_USAGE)
    print(add_token(Path(args.tokens), args.subject, args.read, args.write))
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.files]
    for path in paths:
        if not path.is_file():
            raise CliError(f"no such file: {path}")
    if args.records < 1:
        raise CliError("--records must be at least 1", EXIT_USAGE)
    with _workspace(args) as workspace:
        dataset = workspace.dataset(args.dataset)
        tip = dataset.tip()
        offset = tip.next_offset if tip is not None else 0
        events = []
        for path in paths:
            digest = digest_file(path)
            key = object_key(dataset.name, ObjectKind.DATA, digest.multihash)
            if workspace.store.head(key) is None:
                workspace.store.put_file(key, path)
            interval = OffsetInterval(offset, offset + args.records - 1)
            events.append(AddData(new_data=DataSlice(digest.multihash, digest.size, interval, args.records)))
            offset = interval.end + 1
        new_tip = dataset.append(events)
        print(f"{dataset.name}: added {len(events)} block(s), head {new_tip.head} (block {new_tip.sequence_number})")
    return 0


def _duration(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        value = float(text[:-1]) * units[text[-1]] if text and text[-1] in units else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (examples: 90, 30m, 1h, 2d)") from None
    if value < 0:
        raise argparse.ArgumentTypeError("a duration cannot be negative")
    return value


def _rate(text: str) -> int:
    try:
        return parse_rate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _token(args: argparse.Namespace) -> str | None:
    token: str | None = args.token or os.environ.get(TOKEN_ENV)
    return token


def _report(summary: TransferSummary, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(orjson.dumps(summary.to_dict()).decode() + "\n")
        return
    if summary.note:
        print(f"{summary.dataset}: {summary.note}")
    elif summary.up_to_date:
        print(f"{summary.dataset}: up to date with {summary.remote} (head {summary.new_head})")
        return
    else:
        print(
            f"{summary.dataset}: {summary.operation}ed {summary.blocks} block(s), "
            f"{summary.objects_transferred} object(s) ({summary.bytes_transferred} bytes) moved, "
            f"{summary.objects_skipped} skipped, in {summary.seconds:.2f} s; head {summary.new_head}"
            + (" (simple protocol)" if summary.protocol == "simple" else "")
        )


def _run_transfer(args: argparse.Namespace, operation: str) -> int:
    if args.parallel < 1:
        raise CliError("--parallel must be at least 1", EXIT_USAGE)
    bar = ProgressBar() if not args.json else None
    with _workspace(args) as workspace:
        client = Client(
            workspace,
            token=_token(args),
            parallel=args.parallel,
            progress=bar,
            limit_rate=args.limit_rate,
            protocol=args.protocol,
            fallback=not args.no_fallback,
            warn=lambda text: print(f"smart-transfer: warning: {text}", file=sys.stderr),
        )
        try:
            if operation == "pull":
                summary = asyncio.run(client.pull(args.url, as_name=args.as_name, force=args.force))
            else:
                summary = asyncio.run(client.push(args.dataset, args.url, force=args.force))
        finally:
            if bar is not None:
                bar.finish()
    _report(summary, args.json)
    return 0


def cmd_pull(args: argparse.Namespace) -> int:
    return _run_transfer(args, "pull")


def cmd_push(args: argparse.Namespace) -> int:
    return _run_transfer(args, "push")


def cmd_verify(args: argparse.Namespace) -> int:
    from smart_transfer.client.verify import compare_remote, verify_local

    with _workspace(args) as workspace:
        report, blocks = verify_local(workspace, args.dataset)
        if args.url:
            asyncio.run(compare_remote(report, blocks, workspace, args.url, _token(args)))
    if args.json:
        sys.stdout.write(orjson.dumps(report.to_dict()).decode() + "\n")
    else:
        print(
            f"{report.dataset}: {report.blocks} block(s), {report.objects_checked} object(s) checked, "
            f"head {report.head}"
        )
        for problem in report.problems:
            print(f"  problem: {problem}")
        if report.quarantined:
            print(f"  {len(report.quarantined)} corrupt object(s) moved to quarantine; `pull` fetches them again")
        relations = {
            "same": "identical to the remote (same head)",
            "local-ahead": f"ahead of the remote by {report.local_only_blocks} block(s)",
            "remote-ahead": f"behind the remote by {report.remote_only_blocks} block(s)",
            "diverged": f"diverged from the remote after block {report.common_block}: "
            f"{report.local_only_blocks} local-only and {report.remote_only_blocks} remote-only block(s)",
            "remote-missing": "the remote has no such dataset",
        }
        if report.relation is not None:
            print(f"  {relations[report.relation]} ({report.remote})")
        if report.ok:
            print("  ok")
    if report.problems:
        return EXIT_ERROR
    return EXIT_REJECTED if report.relation == "diverged" else 0


def cmd_gc(args: argparse.Namespace) -> int:
    from smart_transfer.repo.gc import collect_garbage

    settings = _store_settings(args)
    store = settings.open_store(0)
    try:
        report = collect_garbage(store, args.grace, dry_run=args.dry_run)
    finally:
        store.close()
    verb = "would delete" if args.dry_run else "deleted"
    if args.json:
        sys.stdout.write(orjson.dumps({"dry_run": args.dry_run, **report.__dict__}).decode() + "\n")
    else:
        for key in report.deleted:
            print(f"{verb} {key}")
        print(
            f"{report.datasets} dataset(s): {verb} {len(report.deleted)} unreferenced object(s) "
            f"({report.deleted_bytes} bytes); kept {report.kept} referenced and {report.too_young} younger than "
            f"the grace period"
        )
    return 0


def _store_settings(args: argparse.Namespace) -> ServerSettings:
    if (args.s3_endpoint or args.s3_prefix) and not args.s3_bucket:
        raise CliError("--s3-endpoint and --s3-prefix need --s3-bucket", EXIT_USAGE)
    return ServerSettings(
        root=Path(args.root), s3_endpoint=args.s3_endpoint, s3_bucket=args.s3_bucket, s3_prefix=args.s3_prefix or ""
    )


def _describe_event(data: bytes) -> tuple[int, str, str, dict[str, object]]:
    block = decode_block(data)
    event = block.event.to_dict()
    kind = str(event.pop("type"))
    return block.sequence_number, block.system_time, kind, event


def cmd_log(args: argparse.Namespace) -> int:
    with _workspace(args) as workspace:
        dataset = workspace.dataset(args.dataset)
        tip = dataset.require_tip()
        hashes = list(dataset.index.hashes_between(dataset.name, 0, tip.sequence_number))
        hashes.reverse()
        if args.limit is not None:
            hashes = hashes[: args.limit]
        for block_hash in hashes:
            seq, time, kind, event = _describe_event(dataset.block_bytes(block_hash))
            if args.json:
                record = {"sequence_number": seq, "hash": str(block_hash), "system_time": time, "type": kind, **event}
                sys.stdout.write(orjson.dumps(record).decode() + "\n")
            else:
                detail = " ".join(f"{k}={orjson.dumps(v).decode()}" for k, v in sorted(event.items()))
                print(f"{seq:>6}  {block_hash}  {time}  {kind}  {detail}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    with _workspace(args) as workspace:
        rows = []
        for name in workspace.dataset_names():
            tip = workspace.dataset(name).tip()
            if tip is not None:
                rows.append(
                    {
                        "name": str(name),
                        "head": str(tip.head),
                        "blocks": tip.sequence_number + 1,
                        "records": tip.next_offset,
                    }
                )
        if args.json:
            sys.stdout.write(orjson.dumps(rows).decode() + "\n")
        elif not rows:
            print(f"no datasets in {workspace.root}")
        else:
            for row in rows:
                print(f"{row['name']}  {row['head']}  blocks={row['blocks']}  records={row['records']}")
    return 0


def _add_workspace_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workspace",
        type=Path,
        default=None,
        help="workspace directory (default: $SMART_TRANSFER_WORKSPACE or ./.smart-transfer/workspace)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="smart-transfer",
        description="Sync versioned datasets between local workspaces and a server on object storage.",
        epilog="Exit codes: 0 done, 1 error, 2 usage, 3 diverged or rejected.",
    )
    parser.add_argument("--version", action="version", version=f"smart-transfer {smart_transfer.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    defaults = argparse.ArgumentDefaultsHelpFormatter

    serve = commands.add_parser(
        "serve",
        help="run the server",
        formatter_class=defaults,
        description="Serve dataset repositories on the embedded store or on S3.",
    )
    serve.add_argument("--host", default=server_defaults.DEFAULT_HOST, help="address to bind")
    serve.add_argument("--port", type=int, default=server_defaults.DEFAULT_PORT, help="port to bind (0: any free port)")
    serve.add_argument(
        "--root",
        default=str(server_defaults.DEFAULT_ROOT),
        help="directory of the embedded store and the server's index",
    )
    serve.add_argument("--public-url", default=None, help="URL clients reach the server at (default: http://HOST:PORT)")
    serve.add_argument(
        "--s3-endpoint",
        default=None,
        help="S3 endpoint URL (default: AWS, or $AWS_ENDPOINT_URL); credentials from the AWS environment",
    )
    serve.add_argument(
        "--s3-public-endpoint",
        default=None,
        help="S3 endpoint URL as clients reach it, for presigned URLs (default: --s3-endpoint)",
    )
    serve.add_argument(
        "--s3-bucket", default=None, help="keep datasets in this S3 bucket instead of the embedded store"
    )
    serve.add_argument("--s3-prefix", default=None, help="key prefix inside the bucket")
    serve.add_argument(
        "--url-ttl", type=int, default=DEFAULT_URL_TTL_SECONDS, help="lifetime of presigned URLs, seconds"
    )
    serve.add_argument(
        "--max-objects-per-page",
        type=int,
        default=server_defaults.DEFAULT_MAX_OBJECTS_PER_PAGE,
        help="most objects one transfer negotiation page may name",
    )
    serve.add_argument(
        "--tokens",
        default=None,
        metavar="FILE",
        help="tokens file (see `token add`); without it access is anonymous, loopback only",
    )
    serve.add_argument(
        "--allow-anonymous",
        action="store_true",
        help="serve without --tokens on a non-loopback address (anyone reaching it may write)",
    )
    serve.add_argument(
        "--max-sessions",
        type=int,
        default=server_defaults.DEFAULT_MAX_SESSIONS,
        help="concurrent pull/push sessions; more get 'busy, retry after'",
    )
    serve.add_argument(
        "--max-sessions-per-token",
        type=int,
        default=server_defaults.DEFAULT_MAX_SESSIONS_PER_TOKEN,
        help="concurrent sessions of one token subject",
    )
    serve.add_argument(
        "--max-requests",
        type=int,
        default=server_defaults.DEFAULT_MAX_REQUESTS,
        help="concurrent REST requests; more get HTTP 429 with Retry-After",
    )
    serve.add_argument(
        "--max-requests-per-token",
        type=int,
        default=server_defaults.DEFAULT_MAX_REQUESTS_PER_TOKEN,
        help="concurrent REST requests of one token subject",
    )
    serve.add_argument(
        "--max-message-bytes",
        type=int,
        default=server_defaults.DEFAULT_MAX_MESSAGE_BYTES,
        help="largest WebSocket frame accepted (metadata tarballs of pushes included)",
    )
    serve.add_argument(
        "--idle-timeout",
        type=float,
        default=server_defaults.DEFAULT_IDLE_TIMEOUT_SECONDS,
        help="seconds a session may wait for the client's next message",
    )
    serve.add_argument(
        "--session-timeout",
        type=float,
        default=server_defaults.DEFAULT_SESSION_TIMEOUT_SECONDS,
        help="seconds a whole session may last",
    )
    serve.set_defaults(handler=cmd_serve)

    token = commands.add_parser("token", help="manage the server's tokens file", formatter_class=defaults)
    token_commands = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    token_add = token_commands.add_parser(
        "add",
        help="create a token and print it once",
        formatter_class=defaults,
        description="Append a token to the tokens file (only its SHA-256 is stored) and print the secret once.",
    )
    token_add.add_argument("--tokens", required=True, metavar="FILE", help="the tokens file (created if missing)")
    token_add.add_argument("--subject", required=True, help="who the token is for (shown in errors and limits)")
    token_add.add_argument(
        "--read",
        action="append",
        default=[],
        metavar="PATTERN",
        help="dataset-name pattern this token may read (repeatable; * and ? match)",
    )
    token_add.add_argument(
        "--write",
        action="append",
        default=[],
        metavar="PATTERN",
        help="dataset-name pattern this token may write (and read; repeatable)",
    )
    token_add.set_defaults(handler=cmd_token_add)

    add = commands.add_parser(
        "add",
        help="append files to a dataset as data slices",
        formatter_class=defaults,
        description="Append one AddData block per FILE (any bytes, Parquet typically), "
        "creating DATASET with a Seed block on first use.",
    )
    add.add_argument("dataset", metavar="DATASET")
    add.add_argument("files", metavar="FILE", nargs="+")
    add.add_argument("--records", type=int, default=1, help="records each file holds (for the offset intervals)")
    _add_workspace_option(add)
    add.set_defaults(handler=cmd_add)

    log = commands.add_parser("log", help="print a dataset's chain, newest block first", formatter_class=defaults)
    log.add_argument("dataset", metavar="DATASET")
    log.add_argument("--limit", type=int, default=None, help="show at most this many blocks")
    log.add_argument("--json", action="store_true", help="one JSON object per block")
    _add_workspace_option(log)
    log.set_defaults(handler=cmd_log)

    listing = commands.add_parser("list", help="list the datasets in the workspace", formatter_class=defaults)
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    _add_workspace_option(listing)
    listing.set_defaults(handler=cmd_list)

    verify = commands.add_parser(
        "verify",
        help="re-check a local dataset, and compare it with a remote one",
        formatter_class=defaults,
        description="Re-check the chain rules and every block's and object's hash and size. Corrupt objects "
        "are moved to quarantine and named; the next pull fetches them again. Given URL, compare with the remote "
        "head: equal heads mean equal datasets, otherwise it says where the histories part. "
        "Exit: 0 whole, 1 problems found, 3 diverged.",
    )
    verify.add_argument("dataset", metavar="DATASET")
    verify.add_argument("url", metavar="URL", nargs="?", default=None, help="http(s)://HOST:PORT/DATASET")
    verify.add_argument("--token", default=None, help=f"bearer token (default: ${TOKEN_ENV})")
    verify.add_argument("--json", action="store_true", help="print one JSON report")
    _add_workspace_option(verify)
    verify.set_defaults(handler=cmd_verify)

    gc = commands.add_parser(
        "gc",
        help="server side: delete blocks and objects no chain references (left by failed pushes)",
        formatter_class=defaults,
        description="Delete blocks that are on no dataset's chain and data and checkpoint objects no chain "
        "references, once they are older than the grace period. The chain, what it references, and young blocks "
        "a running push may still commit are never deleted. Keep --grace at least the server's --session-timeout.",
    )
    gc.add_argument("--grace", type=_duration, default=3600.0, help="minimum age, e.g. 30m, 1h, 2d (or seconds)")
    gc.add_argument("--dry-run", action="store_true", help="only list what would be deleted")
    gc.add_argument("--json", action="store_true", help="print one JSON report")
    gc.add_argument("--root", default=str(server_defaults.DEFAULT_ROOT), help="the embedded store's directory")
    gc.add_argument("--s3-endpoint", default=None, help="S3 endpoint URL")
    gc.add_argument("--s3-bucket", default=None, help="S3 bucket (instead of the embedded store)")
    gc.add_argument("--s3-prefix", default=None, help="key prefix inside the bucket")
    gc.set_defaults(handler=cmd_gc)

    register_ingest(commands)

    pull = commands.add_parser(
        "pull",
        help="pull a dataset from a server into the workspace",
        formatter_class=defaults,
        description="Bring a local dataset up to the remote head. Blocks travel in one WebSocket session; "
        "objects are downloaded directly from storage in parallel and verified before the local head moves. "
        "Re-running an interrupted pull resumes it.",
    )
    pull.add_argument("url", metavar="URL", help="http(s)://HOST:PORT/DATASET")
    pull.add_argument("--as", dest="as_name", default=None, help="local dataset name (default: the remote name)")
    _add_transfer_options(pull, "replace the local history when it diverged from the remote one (same Seed only)")
    pull.set_defaults(handler=cmd_pull)

    push = commands.add_parser(
        "push",
        help="push a workspace dataset to a server",
        formatter_class=defaults,
        description="Make the remote dataset's head the local head. Objects are uploaded directly to storage; "
        "the server verifies every one (size and MD5) before it moves the remote head. Objects the server "
        "already has are never uploaded again.",
    )
    push.add_argument("dataset", metavar="DATASET")
    push.add_argument("url", metavar="URL", help="http(s)://HOST:PORT/DATASET")
    _add_transfer_options(push, "replace the remote history when it diverged from the local one (same Seed only)")
    push.set_defaults(handler=cmd_push)
    return parser


def _add_transfer_options(parser: argparse.ArgumentParser, force_help: str) -> None:
    parser.add_argument("--force", action="store_true", help=force_help)
    parser.add_argument("--parallel", type=int, default=DEFAULT_PARALLEL, help="concurrent object transfers")
    parser.add_argument("--token", default=None, help=f"bearer token (default: ${TOKEN_ENV})")
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
    _add_workspace_option(parser)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except BrokenPipeError:
        # the reader went away (e.g. `log | head`): not an error worth a line
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except CliError as exc:
        code = exc.exit_code
        message = str(exc)
    except HeadMoved as exc:
        code, message = EXIT_REJECTED, str(exc)
    except DivergedError as exc:
        code, message = EXIT_REJECTED, str(exc)
    except RemoteError as exc:
        code, message = (EXIT_REJECTED if exc.code in REJECTIONS else EXIT_ERROR), str(exc)
    except TransferFailed as exc:
        code, message = EXIT_ERROR, f"transfer failed: {exc}"
    except DatasetNotFound as exc:
        code, message = EXIT_ERROR, str(exc)
    except (ModelError, StorageError, RepositoryError, OSError) as exc:
        code, message = EXIT_ERROR, str(exc)
    except KeyboardInterrupt:
        code, message = 130, "interrupted"
    except Exception as exc:  # last resort: a bug must still not show users a traceback
        code, message = EXIT_ERROR, f"unexpected {type(exc).__name__}: {exc}"
    print(f"smart-transfer: error: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
