"""``serve``, ``token``, ``gc`` and ``repack``: the server-side commands. Only the light settings module (the
defaults ``--help`` shows) is imported up front; the app, uvicorn, auth and gc only when one runs."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from smart_transfer.client.commands.common import Commands, add_parser, print_json, print_rows, serve_until_stopped
from smart_transfer.client.exits import EXIT_USAGE, CliError
from smart_transfer.protocol import MAX_PEERS
from smart_transfer.server import settings as defaults

if TYPE_CHECKING:
    from smart_transfer.server.settings import ServerSettings


def _duration(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        value = float(text[:-1]) * units[text[-1]] if text and text[-1] in units else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (examples: 90, 30m, 1h, 2d)") from None
    if value < 0:
        raise argparse.ArgumentTypeError("a duration cannot be negative")
    return value


def _size(text: str) -> int:
    from smart_transfer.transfer.ratelimit import parse_rate

    try:
        return parse_rate(text)  # the same units: 5M, 64MiB, 1G, or bytes
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (examples: 5M, 64MiB, 1G)") from None


def _check_s3(args: argparse.Namespace) -> None:
    if (args.s3_endpoint or args.s3_prefix) and not args.s3_bucket:
        raise CliError("--s3-endpoint and --s3-prefix need --s3-bucket", EXIT_USAGE)


def _settings(args: argparse.Namespace) -> ServerSettings:
    from smart_transfer.server.settings import ServerSettings

    _check_s3(args)
    if isinstance(args.allow_anonymous, str):
        raise CliError(f"${ENV_PREFIX}ALLOW_ANONYMOUS must be 1/true/yes or 0/false/no", EXIT_USAGE)
    names = [
        "host",
        "port",
        "public_url",
        "s3_endpoint",
        "s3_public_endpoint",
        "s3_bucket",
        "allow_anonymous",
        "log_format",
        "forwarded_allow_ips",
    ]
    limits = {field: getattr(args, flag.lstrip("-").replace("-", "_")) for flag, _, _, _, field in LIMITS}
    for flag, _, _, _, field in LIMITS:
        if limits[field] < 0 or (limits[field] == 0 and flag != "--shutdown-grace"):
            raise CliError(f"{flag} must be more than 0", EXIT_USAGE)
    if limits["max_peers_listed"] > MAX_PEERS:
        raise CliError(f"--max-peers-listed must be at most {MAX_PEERS}", EXIT_USAGE)
    if limits["follow_poll_min_seconds"] > limits["follow_poll_max_seconds"]:
        raise CliError("--follow-poll-min must not exceed --follow-poll-max", EXIT_USAGE)
    return ServerSettings(
        root=Path(args.root),
        s3_prefix=args.s3_prefix or "",
        tokens_file=Path(args.tokens) if args.tokens else None,
        **{name: getattr(args, name) for name in names},
        **limits,
    )


def run_serve(args: argparse.Namespace) -> int:
    from smart_transfer.server.runner import serve

    settings = _settings(args)
    try:
        settings.check_parts()
        settings.check_exposure()
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    return serve_until_stopped(lambda: serve(settings))


def run_token_add(args: argparse.Namespace) -> int:
    from smart_transfer.server.auth import TokensFileError, add_token

    if not args.read and not args.write:
        raise CliError("give at least one --read or --write pattern", EXIT_USAGE)
    try:
        print(add_token(Path(args.tokens), args.subject, args.read, args.write))
    except TokensFileError as exc:
        raise CliError(str(exc)) from None
    return 0


def run_token_profile(args: argparse.Namespace) -> int:
    from smart_transfer.server.auth import TokensFileError, add_token
    from smart_transfer.server.delta_sharing.profile import profile_bytes, sharing_profile, write_profile

    if not args.read:
        raise CliError("give at least one --read pattern", EXIT_USAGE)
    try:
        profile = sharing_profile(args.url, "")
        profile["bearerToken"] = add_token(Path(args.tokens), args.subject, args.read, [])
    except (ValueError, TokensFileError) as exc:
        raise CliError(str(exc), EXIT_USAGE if isinstance(exc, ValueError) else 1) from None
    if args.output == "-":
        print(profile_bytes(profile).decode(), end="")
    else:
        write_profile(Path(args.output), profile)
        print(f"wrote a Delta Sharing profile for {args.subject} to {args.output}")
    return 0


def run_token_list(args: argparse.Namespace) -> int:
    from smart_transfer.server.auth import TokensFileError, load_grants

    try:
        grants = load_grants(Path(args.tokens))
    except TokensFileError as exc:
        raise CliError(str(exc)) from None
    rows = [{"subject": g.subject, "read": list(g.read), "write": list(g.write)} for g in grants]
    print_rows(
        rows,
        args.json,
        f"no tokens in {args.tokens}",
        lambda row: f"{row['subject']}  read={','.join(row['read']) or '-'}  write={','.join(row['write']) or '-'}",
    )
    return 0


def run_token_revoke(args: argparse.Namespace) -> int:
    from smart_transfer.server.auth import TokensFileError, revoke_tokens

    try:
        removed = revoke_tokens(Path(args.tokens), args.subject)
    except TokensFileError as exc:
        raise CliError(str(exc)) from None
    if not removed:
        raise CliError(f"no token of {args.subject!r} in {args.tokens}")
    print(f"revoked {removed} token(s) of {args.subject}; a running server refuses them from its next request")
    return 0


def run_gc(args: argparse.Namespace) -> int:
    from smart_transfer.repo.gc import collect_garbage
    from smart_transfer.server.settings import ServerSettings

    _check_s3(args)
    settings = ServerSettings(
        root=Path(args.root), s3_endpoint=args.s3_endpoint, s3_bucket=args.s3_bucket, s3_prefix=args.s3_prefix or ""
    )
    store = settings.open_store(0)
    try:
        report = collect_garbage(store, args.grace, dry_run=args.dry_run, repack=args.repack)
    finally:
        store.close()
    verb = "would delete" if args.dry_run else "deleted"
    if args.json:
        print_json({"dry_run": args.dry_run, **report.__dict__})
        return 0
    for key in report.written:
        print(f"{'would write' if args.dry_run else 'wrote'} {key}")
    for key in report.deleted:
        print(f"{verb} {key}")
    for upload in report.aborted_uploads:
        print(f"{'would abort' if args.dry_run else 'aborted'} the unfinished upload of {upload}")
    packed = f"{len(report.written)} pack(s) written, " if args.repack else ""
    print(
        f"{report.datasets} dataset(s): {packed}{verb} {len(report.deleted)} unneeded object(s) "
        f"({report.deleted_bytes} bytes), {len(report.aborted_uploads)} unfinished upload(s); kept "
        f"{report.kept} needed and {report.too_young} younger than the grace period"
    )
    return 0


def _add_store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", default=str(defaults.DEFAULT_ROOT), help="directory of the embedded store and index")
    parser.add_argument(
        "--s3-endpoint",
        default=None,
        help="S3 endpoint URL (default: AWS, or $AWS_ENDPOINT_URL); credentials from the AWS environment",
    )
    parser.add_argument(
        "--s3-bucket", default=None, help="keep datasets in this S3 bucket instead of the embedded store"
    )
    parser.add_argument("--s3-prefix", default=None, help="key prefix inside the bucket")


#: serve's numeric limits and bounds: (flag, type, default, help, ServerSettings field).
LIMITS: list[tuple[str, Callable[[str], object], object, str, str]] = [
    ("--url-ttl", int, defaults.DEFAULT_URL_TTL_SECONDS, "lifetime of presigned URLs, seconds", "url_ttl_seconds"),
    (
        "--sharing-url-ttl",
        int,
        defaults.DEFAULT_SHARING_URL_TTL_SECONDS,
        "lifetime of Delta Sharing query URLs, seconds (capped at 7 days)",
        "sharing_url_ttl_seconds",
    ),
    (
        "--max-objects-per-page",
        int,
        defaults.DEFAULT_MAX_OBJECTS_PER_PAGE,
        "most objects one negotiation page may name",
        "max_objects_per_page",
    ),
    (
        "--max-sessions",
        int,
        defaults.DEFAULT_MAX_SESSIONS,
        "concurrent pull/push sessions; more get 'busy, retry after'",
        "max_sessions",
    ),
    (
        "--max-sessions-per-token",
        int,
        defaults.DEFAULT_MAX_SESSIONS_PER_TOKEN,
        "concurrent sessions of one token subject (anonymous: of one client address)",
        "max_sessions_per_token",
    ),
    (
        "--max-requests",
        int,
        defaults.DEFAULT_MAX_REQUESTS,
        "concurrent REST requests; more get HTTP 429 with Retry-After",
        "max_requests",
    ),
    (
        "--max-requests-per-token",
        int,
        defaults.DEFAULT_MAX_REQUESTS_PER_TOKEN,
        "concurrent REST requests of one token (anonymous: of one client address)",
        "max_requests_per_token",
    ),
    (
        "--max-connections",
        int,
        defaults.DEFAULT_MAX_CONNECTIONS,
        "open connections (HTTP, idle keep-alive, WebSocket); more are answered 503 and closed",
        "max_connections",
    ),
    (
        "--max-message-bytes",
        int,
        defaults.DEFAULT_MAX_MESSAGE_BYTES,
        "largest WebSocket frame accepted (tarballs too)",
        "max_message_bytes",
    ),
    (
        "--header-timeout",
        float,
        defaults.DEFAULT_HEADER_TIMEOUT_SECONDS,
        "seconds a client may take to send a request's headers",
        "header_timeout_seconds",
    ),
    (
        "--keep-alive-timeout",
        float,
        defaults.DEFAULT_KEEP_ALIVE_SECONDS,
        "seconds an idle kept-alive HTTP connection stays open",
        "keep_alive_seconds",
    ),
    (
        "--idle-timeout",
        float,
        defaults.DEFAULT_IDLE_TIMEOUT_SECONDS,
        "seconds a session may wait for the client",
        "idle_timeout_seconds",
    ),
    (
        "--session-timeout",
        float,
        defaults.DEFAULT_SESSION_TIMEOUT_SECONDS,
        "seconds a whole session may last",
        "session_timeout_seconds",
    ),
    (
        "--keepalive-interval",
        float,
        defaults.DEFAULT_KEEPALIVE_INTERVAL_SECONDS,
        "seconds between the server's keep-alives: WebSocket pings, and Progress while it verifies a push",
        "keepalive_interval_seconds",
    ),
    (
        "--shutdown-grace",
        float,
        defaults.DEFAULT_SHUTDOWN_GRACE_SECONDS,
        "seconds running sessions may take to finish after SIGTERM before they end with ShuttingDown",
        "shutdown_grace_seconds",
    ),
    (
        "--ready-timeout",
        float,
        defaults.DEFAULT_READY_TIMEOUT_SECONDS,
        "seconds GET /readyz waits for the store",
        "ready_timeout_seconds",
    ),
    (
        "--s3-connect-timeout",
        float,
        defaults.DEFAULT_S3_CONNECT_TIMEOUT,
        "seconds to connect to S3",
        "s3_connect_timeout",
    ),
    (
        "--s3-read-timeout",
        float,
        defaults.DEFAULT_S3_READ_TIMEOUT,
        "seconds S3 may send nothing before a call's attempt fails",
        "s3_read_timeout",
    ),
    ("--s3-attempts", int, defaults.DEFAULT_S3_ATTEMPTS, "attempts of one S3 call (backoff between)", "s3_attempts"),
    (
        "--peer-ttl",
        float,
        defaults.DEFAULT_PEER_TTL_SECONDS,
        "seconds a peer announcement (pull --announce) stays listed; a following session renews its own",
        "peer_ttl_seconds",
    ),
    (
        "--max-peers-listed",
        int,
        defaults.DEFAULT_MAX_PEERS_LISTED,
        f"most live peers one pull plan lists (at most {MAX_PEERS})",
        "max_peers_listed",
    ),
    (
        "--follow-poll-min",
        float,
        defaults.DEFAULT_FOLLOW_POLL_MIN_SECONDS,
        "pull --follow: seconds between reads of a followed head in the store right after it moved",
        "follow_poll_min_seconds",
    ),
    (
        "--follow-poll-max",
        float,
        defaults.DEFAULT_FOLLOW_POLL_MAX_SECONDS,
        "pull --follow: longest interval between head reads (doubling while nothing changes); pushes "
        "through another replica reach followers within it, pushes through this one at once",
        "follow_poll_max_seconds",
    ),
    (
        "--multipart-threshold",
        _size,
        defaults.DEFAULT_MULTIPART_THRESHOLD,
        "objects larger than this are uploaded in parts (multipart: parallel, resumable part by part)",
        "multipart_threshold",
    ),
    (
        "--part-size",
        _size,
        defaults.DEFAULT_PART_SIZE,
        "size of those parts, 5M..5G (grown for objects that would need more than 1024 parts)",
        "part_size",
    ),
    (
        "--error-log-rate",
        float,
        defaults.DEFAULT_ERROR_LOG_RATE,
        "error log lines per second at most (bursts of 10 s worth); the rest are counted, not written",
        "error_log_rate",
    ),
]
#: Every serve flag may also come from the environment: --max-sessions from $SMART_TRANSFER_MAX_SESSIONS.
ENV_PREFIX = "SMART_TRANSFER_"
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def _defaults_from_environment(parser: argparse.ArgumentParser) -> None:
    """Each option's default from its ``SMART_TRANSFER_*`` variable when set (the command line wins).
    A string default goes through the option's type like a command-line value, so a bad one is a
    usage error naming the option."""
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        name = ENV_PREFIX + action.dest.upper()
        action.help = f"{action.help or ''} [${name}]"
        value = os.environ.get(name)
        if value is None:
            continue
        if action.nargs == 0:  # a switch
            lowered = value.strip().lower()
            action.default = True if lowered in _TRUE else False if lowered in _FALSE else value
        else:
            action.default = value


def _register_serve(commands: Commands) -> None:
    serve = add_parser(
        commands,
        "serve",
        help="run the server",
        description="Serve dataset repositories on the embedded store or on S3.",
    )
    serve.add_argument("--host", default=defaults.DEFAULT_HOST, help="address to bind")
    serve.add_argument("--port", type=int, default=defaults.DEFAULT_PORT, help="port to bind (0: any free port)")
    serve.add_argument("--public-url", default=None, help="URL clients reach the server at (default: http://HOST:PORT)")
    _add_store_options(serve)
    serve.add_argument(
        "--s3-public-endpoint",
        default=None,
        help="S3 endpoint URL as clients reach it, for presigned URLs (default: --s3-endpoint)",
    )
    for flag, kind, default, text, _ in LIMITS:
        serve.add_argument(flag, type=kind, default=default, help=text)
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
        "--log-format",
        choices=defaults.LOG_FORMATS,
        default=defaults.DEFAULT_LOG_FORMAT,
        help="access and error log lines on stderr: text, or one JSON object per line",
    )
    serve.add_argument(
        "--forwarded-allow-ips",
        default=defaults.DEFAULT_FORWARDED_ALLOW_IPS,
        metavar="IPS",
        help="comma-separated addresses (or *) of balancers whose X-Forwarded-For names the client",
    )
    _defaults_from_environment(serve)
    serve.set_defaults(handler=run_serve)


def _register_token(commands: Commands) -> None:
    token = add_parser(commands, "token", help="manage the server's tokens file")
    actions = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    token_add = add_parser(
        actions,
        "add",
        help="create a token and print it once",
        description="Append a token to the tokens file (only its SHA-256 is stored) and print the secret once.",
    )
    token_add.add_argument("--tokens", required=True, metavar="FILE", help="the tokens file (created if missing)")
    token_add.add_argument("--subject", required=True, help="who the token is for (shown in errors and limits)")
    for access, text in (("read", "read"), ("write", "write (and read)")):
        token_add.add_argument(
            f"--{access}",
            action="append",
            default=[],
            metavar="PATTERN",
            help=f"dataset-name pattern this token may {text}; repeatable; * and ? match",
        )
    token_add.set_defaults(handler=run_token_add)
    profile = add_parser(
        actions,
        "profile",
        help="create a read token and write it as a Delta Sharing profile file",
        description="Append a read-only token for SUBJECT to the tokens file and write the Delta Sharing "
        "profile a client loads tables with (endpoint URL/delta-sharing, the token).",
    )
    profile.add_argument("subject", metavar="SUBJECT")
    profile.add_argument("--tokens", required=True, metavar="FILE", help="the tokens file (created if missing)")
    profile.add_argument("--url", required=True, help="the server's URL as clients reach it (https://HOST)")
    profile.add_argument(
        "--read", action="append", default=[], metavar="PATTERN", help="dataset-name pattern; repeatable"
    )
    profile.add_argument("--output", "-o", default="-", metavar="FILE", help="profile file (default: standard output)")
    profile.set_defaults(handler=run_token_profile)
    token_list = add_parser(
        actions,
        "list",
        help="list the tokens' subjects and grants (never secrets)",
        description="List every "
        "token of the tokens file: its subject and its read and write patterns. Secrets are not stored.",
    )
    token_list.add_argument("--json", action="store_true", help="print a JSON array")
    token_revoke = add_parser(
        actions,
        "revoke",
        help="remove every token of a subject",
        description="Remove every token of SUBJECT from the tokens file. A running server re-reads the file "
        "when it changes: the tokens are refused from the next request or session on (sessions already "
        "running finish).",
    )
    token_revoke.add_argument("subject", metavar="SUBJECT")
    for parser, handler in ((token_list, run_token_list), (token_revoke, run_token_revoke)):
        parser.add_argument("--tokens", required=True, metavar="FILE", help="the tokens file")
        parser.set_defaults(handler=handler)


def register(commands: Commands) -> None:
    _register_serve(commands)
    _register_token(commands)
    gc = add_parser(
        commands,
        "gc",
        help="server side: delete blocks and objects no chain needs (left by failed pushes)",
        description="Delete block packs and single-block objects holding no block of a dataset's chain (and "
        "single-block objects a pack holds too), and data and checkpoint objects no chain references, once they "
        "are older than the grace period, and abort multipart uploads started before then. The chain, what it "
        "references, and young blocks a running push may still commit are never deleted. Keep --grace at least "
        "the server's --session-timeout.",
    )
    repack = add_parser(
        commands,
        "repack",
        help="server side: store each dataset's chain as one block pack, then gc",
        description="Write each dataset's chain as one block pack (repositories from before packs keep one "
        "object per block; a history of pushes has one pack per push), then delete what that pack makes "
        "redundant and what gc deletes. Readers keep working throughout: a block is only deleted once a pack "
        "that stays holds it.",
    )
    for parser, is_repack in ((gc, False), (repack, True)):
        parser.add_argument(
            "--grace", type=_duration, default=3600.0, help="minimum age, e.g. 30m, 1h, 2d (or seconds)"
        )
        parser.add_argument("--dry-run", action="store_true", help="only list what would be written and deleted")
        parser.add_argument("--json", action="store_true", help="print one JSON report")
        _add_store_options(parser)
        parser.set_defaults(handler=run_gc, repack=is_repack)
