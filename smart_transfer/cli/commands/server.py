"""``serve``, ``token``, ``gc`` and ``repack``: the server-side commands. Only the light settings module (the
declarations ``--help`` shows) is imported up front; the app, uvicorn, auth and gc only when one runs."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smart_transfer.cli.commands.common import (
    Commands,
    add_parser,
    dataset_name,
    print_json,
    print_rows,
    serve_until_stopped,
)
from smart_transfer.cli.declared import add_bounded, add_settings, settings_from
from smart_transfer.cli.exits import EXIT_USAGE, CliError
from smart_transfer.config.units import EXPIRY_FORMAT, duration, expiry
from smart_transfer.server.settings import ENV_PREFIX, ServerSettings

if TYPE_CHECKING:
    from collections.abc import Sequence

    from smart_transfer.repo.gc import GcReport
    from smart_transfer.server.auth import Grant
    from smart_transfer.storage import ObjectStore


def run_serve(args: argparse.Namespace) -> int:
    from smart_transfer.server.auth import load_grants
    from smart_transfer.server.runner import serve
    from smart_transfer.server.tokens_file import TokensFileError

    settings = settings_from(args, ServerSettings, ENV_PREFIX)
    try:
        settings.check_exposure()
        if settings.tokens_file is not None:
            load_grants(settings.tokens_file)  # a file it cannot use is refused before anything starts
    except (ValueError, TokensFileError) as exc:
        raise CliError(f"--tokens: {exc}" if isinstance(exc, TokensFileError) else str(exc), EXIT_USAGE) from None
    return serve_until_stopped(lambda: serve(settings))


def expires_at(text: str) -> datetime:
    """An argparse type: when a new token stops working (``30d``, ``12h``, ``90m`` from now, or an ISO-8601
    time; UTC unless it says otherwise), refused as a usage error when it is malformed or not in the future."""
    try:
        return expiry(text, datetime.now(UTC))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _token_row(grant: Grant) -> dict[str, Any]:
    """One token as ``token list`` shows it: never its secret or hash."""
    expires = grant.expires_at
    return {
        "subject": grant.subject,
        "read": list(grant.read),
        "write": list(grant.write),
        "expires": expires.strftime(EXPIRY_FORMAT) if expires else None,
        "expired": expires is not None and expires <= datetime.now(UTC),
    }


def run_token_add(args: argparse.Namespace) -> int:
    from smart_transfer.server.auth import add_token
    from smart_transfer.server.tokens_file import TokensFileError

    if not args.read and not args.write:
        raise CliError("give at least one --read or --write pattern", EXIT_USAGE)
    try:
        print(add_token(Path(args.tokens), args.subject, args.read, args.write, expires=args.expires))
    except TokensFileError as exc:
        raise CliError(str(exc)) from None
    return 0


def run_token_profile(args: argparse.Namespace) -> int:
    """A new read token, written as a Delta Sharing profile (to a file or standard output) and then added
    to the tokens file: the profile is complete and durable before the token is live, so a profile that
    cannot be written adds no token, and a token that cannot be added takes back a profile file it created."""
    from smart_transfer.reading.output import output_written
    from smart_transfer.server.auth import add_token, check_tokens_file, hash_token, new_token
    from smart_transfer.server.delta_sharing.profile import profile_bytes, sharing_profile
    from smart_transfer.server.tokens_file import TokensFileError, new_entry

    if not args.read:
        raise CliError("give at least one --read pattern", EXIT_USAGE)
    try:
        expiration = args.expires.strftime(EXPIRY_FORMAT) if args.expires else None
        profile = sharing_profile(args.url, new_token(), expiration)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    tokens = Path(args.tokens)
    try:
        check_tokens_file(tokens)  # a file no token can be added to is refused before the profile is written
        secret = profile["bearerToken"]
        new_entry(args.subject, hash_token(secret), args.read, [], args.expires)  # and an entry it would refuse
        with output_written(args.output, profile_bytes(profile), mode=0o600):
            add_token(tokens, args.subject, args.read, [], secret, args.expires)
    except TokensFileError as exc:
        raise CliError(str(exc)) from None
    if args.output != "-":
        print(f"wrote a Delta Sharing profile for {args.subject} to {args.output}")
    return 0


def run_token_list(args: argparse.Namespace) -> int:
    from smart_transfer.server.auth import load_grants
    from smart_transfer.server.tokens_file import TokensFileError

    try:
        grants = load_grants(Path(args.tokens))
    except TokensFileError as exc:
        raise CliError(str(exc)) from None
    rows = [_token_row(grant) for grant in grants]
    print_rows(
        rows,
        args.json,
        f"no tokens in {args.tokens}",
        lambda row: (
            f"{row['subject']}  read={','.join(row['read']) or '-'}  write={','.join(row['write']) or '-'}"
            f"  expires={row['expires'] or 'never'}{' (expired)' if row['expired'] else ''}"
        ),
    )
    return 0


def run_token_revoke(args: argparse.Namespace) -> int:
    from smart_transfer.server.auth import revoke_tokens
    from smart_transfer.server.tokens_file import TokensFileError

    try:
        removed = revoke_tokens(Path(args.tokens), args.subject)
    except TokensFileError as exc:
        raise CliError(str(exc)) from None
    if not removed:
        raise CliError(f"no token of {args.subject!r} in {args.tokens}")
    print(f"revoked {removed} token(s) of {args.subject}; a running server refuses them from its next request")
    return 0


def _gc_progress(dataset: str, report: GcReport) -> None:
    """One line on a terminal's stderr after each dataset (the running totals)."""
    print(
        f"gc: {report.datasets} dataset(s) done, the last {dataset}; {len(report.deleted)} unneeded object(s) "
        f"so far, {report.kept} kept",
        file=sys.stderr,
        flush=True,
    )


def _check_datasets_exist(store: ObjectStore, names: Sequence[str]) -> None:
    """Refuse a dataset the store holds nothing of (a typo would otherwise do nothing, silently)."""
    for name in names:
        if next(iter(store.list_children(f"{name}/")), None) is None:
            raise CliError(f"no dataset {name} in {store.describe()}")


def _existing_store(settings: ServerSettings) -> ObjectStore:
    """The configured store; gc never creates one (a mistyped --root would leave an empty one behind)."""
    if settings.s3_bucket is None and not settings.embedded_root.is_dir():
        raise CliError(f"no store in {settings.root} (nothing to collect; is --root right?)")
    return settings.open_store(0)


def run_gc(args: argparse.Namespace) -> int:
    from smart_transfer.repo.gc import collect_garbage

    store = _existing_store(settings_from(args, ServerSettings, None))
    progress = _gc_progress if sys.stderr.isatty() else None
    try:
        _check_datasets_exist(store, args.datasets or ())
        report = collect_garbage(
            store, args.grace, dry_run=args.dry_run, repack=args.repack, datasets=args.datasets, progress=progress
        )
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


#: The settings gc and repack take: where the store is.
STORE_SETTINGS = ("root", "s3_endpoint", "s3_bucket", "s3_prefix", "s3_region")


def _register_serve(commands: Commands) -> None:
    serve = add_parser(
        commands,
        "serve",
        help="run the server",
        description="Serve dataset repositories on the embedded store or on S3.",
    )
    add_settings(serve, ServerSettings, ENV_PREFIX)
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
    _add_expires(token_add)
    token_add.set_defaults(handler=run_token_add)
    _register_profile(actions)
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


def _add_expires(parser: argparse.ArgumentParser, note: str = "") -> None:
    parser.add_argument(
        "--expires",
        type=expires_at,
        metavar="WHEN",
        help=f"when the token stops working{note}: a time from now (30d, 12h, 90m) or an ISO-8601 date or time "
        "(UTC unless it gives an offset); default: never",
    )


def _register_profile(actions: Commands) -> None:
    profile = add_parser(
        actions,
        "profile",
        help="create a read token and write it as a Delta Sharing profile file",
        description="Write the Delta Sharing profile a client loads tables with (the endpoint URL/delta-sharing "
        "and a new read-only token for SUBJECT), then add that token to the tokens file. The file is written "
        "like `export` writes (mode 0600): a new or regular file is replaced whole, a device or FIFO written in "
        "place; '-' (the default) is standard output.",
    )
    profile.add_argument("subject", metavar="SUBJECT")
    profile.add_argument("--tokens", required=True, metavar="FILE", help="the tokens file (created if missing)")
    profile.add_argument("--url", required=True, help="the server's URL as clients reach it (https://HOST)")
    profile.add_argument(
        "--read", action="append", default=[], metavar="PATTERN", help="dataset-name pattern; repeatable"
    )
    profile.add_argument("--output", "-o", default="-", metavar="FILE", help="profile file (default: standard output)")
    _add_expires(profile, " (the profile's expirationTime)")
    profile.set_defaults(handler=run_token_profile)


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
        add_bounded(
            parser,
            "--grace",
            default=3600.0,
            help="minimum age, e.g. 30m, 1h, 2d (or seconds)",
            parse=duration,
            minimum=0,
            maximum=10 * 365 * 86400,
            unit="seconds",
            metavar="DURATION",
        )
        parser.add_argument("--dry-run", action="store_true", help="only list what would be written and deleted")
        parser.add_argument(
            "--dataset",
            dest="datasets",
            action="append",
            type=dataset_name,
            metavar="NAME",
            help="only this dataset (repeat for more; default: every dataset of the store, one at a time)",
        )
        parser.add_argument("--json", action="store_true", help="print one JSON report")
        add_settings(parser, ServerSettings, None, only=STORE_SETTINGS)
        parser.set_defaults(handler=run_gc, repack=is_repack)
