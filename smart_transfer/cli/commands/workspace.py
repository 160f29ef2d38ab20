"""``add``, ``log`` and ``list``: commands on the local workspace."""

from __future__ import annotations

import argparse
from pathlib import Path

from smart_transfer.cli.commands.common import (
    Commands,
    add_dataset_argument,
    add_parser,
    add_workspace_option,
    existing_workspace,
    open_workspace,
    print_json,
    print_rows,
)
from smart_transfer.cli.declared import add_bounded
from smart_transfer.cli.exits import EXIT_USAGE, CliError


def file_records(path: Path, given: int | None) -> int:
    """The records ``path`` holds: a Parquet file's footer says (``given`` must agree); another file's
    are ``given`` (default 1)."""
    from smart_transfer.repo.footer import MAGIC, NotParquet, file_footer

    with path.open("rb") as handle:
        handle.seek(max(0, path.stat().st_size - len(MAGIC)))
        parquet = handle.read() == MAGIC
    if not parquet:
        return 1 if given is None else given
    try:
        rows = int(file_footer(path).num_rows)
    except NotParquet as exc:
        raise CliError(f"{exc}: it ends with PAR1 but its footer cannot be read (nothing added)") from None
    if rows < 1:
        raise CliError(f"{path} is a Parquet file with no rows: a slice holds at least one (nothing added)")
    if given is not None and given != rows:
        raise CliError(f"--records {given} disagrees with {path}'s Parquet footer ({rows} rows): nothing added")
    return rows


def run_add(args: argparse.Namespace) -> int:
    from smart_transfer.model import AddData, DataSlice, ObjectKind, ObjectRef, OffsetInterval
    from smart_transfer.storage.digest import digest_file

    paths = [Path(p) for p in args.files]
    for path in paths:
        if not path.is_file():
            raise CliError(f"no such file: {path}")
    if args.records is not None and args.records < 1:
        raise CliError("--records must be at least 1", EXIT_USAGE)  # the parser refuses it first
    counts = [file_records(path, args.records) for path in paths]  # every file checked before any change
    with open_workspace(args) as workspace:
        dataset = workspace.dataset(args.dataset)
        tip = dataset.tip()
        offset = tip.next_offset if tip is not None else 0
        events = []
        for path, records in zip(paths, counts, strict=True):
            digest = digest_file(path)
            key = dataset.object_key(ObjectRef(ObjectKind.DATA, digest.multihash, digest.size))
            if workspace.store.head(key) is None:
                workspace.store.put_file(key, path)
            interval = OffsetInterval(offset, offset + records - 1)
            events.append(AddData(new_data=DataSlice(digest.multihash, digest.size, interval, records)))
            offset = interval.end + 1
        new_tip = dataset.append(events)
        print(f"{dataset.name}: added {len(events)} block(s), head {new_tip.head} (block {new_tip.sequence_number})")
    return 0


def _describe_event(data: bytes) -> tuple[int, str, str, dict[str, object]]:
    from smart_transfer.model import decode_block

    block = decode_block(data)
    event = block.event.to_dict()
    kind = str(event.pop("type"))
    return block.sequence_number, block.system_time, kind, event


def run_log(args: argparse.Namespace) -> int:
    import orjson

    with existing_workspace(args, read_only=True) as workspace:
        dataset = workspace.dataset(args.dataset)
        tip = dataset.require_tip()
        hashes = list(dataset.hashes_between(0, tip.sequence_number))[::-1]
        for block_hash in hashes[: args.limit]:
            seq, time, kind, event = _describe_event(dataset.block_bytes(block_hash))
            if args.json:
                print_json(
                    {"sequence_number": seq, "hash": str(block_hash), "system_time": time, "type": kind, **event}
                )
            else:
                detail = " ".join(f"{k}={orjson.dumps(v).decode()}" for k, v in sorted(event.items()))
                print(f"{seq:>6}  {block_hash}  {time}  {kind}  {detail}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    with existing_workspace(args, read_only=True) as workspace:
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
        print_rows(
            rows,
            args.json,
            f"no datasets in {workspace.root}",
            lambda row: f"{row['name']}  {row['head']}  blocks={row['blocks']}  records={row['records']}",
        )
    return 0


def register(commands: Commands) -> None:
    add = add_parser(
        commands,
        "add",
        help="append files to a dataset as data slices",
        description="Append one AddData block per FILE (any bytes, Parquet typically), "
        "creating DATASET with a Seed block on first use. A Parquet file's record count is its footer's.",
    )
    add_dataset_argument(add)
    add.add_argument("files", metavar="FILE", nargs="+")
    add_bounded(
        add,
        "--records",
        default=None,
        help="records each file that is not Parquet holds (default 1; a Parquet file's footer says, and a "
        "--records that disagrees with it is refused)",
        parse=int,
        minimum=1,
        maximum=2**53,
    )
    add_workspace_option(add)
    add.set_defaults(handler=run_add)

    log = add_parser(commands, "log", help="print a dataset's chain, newest block first")
    add_dataset_argument(log)
    add_bounded(
        log,
        "--limit",
        default=None,
        help="show at most this many blocks (default: all)",
        parse=int,
        minimum=1,
        maximum=2**53,
    )
    log.add_argument("--json", action="store_true", help="one JSON object per block")
    add_workspace_option(log)
    log.set_defaults(handler=run_log)

    listing = add_parser(commands, "list", help="list the datasets in the workspace")
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    add_workspace_option(listing)
    listing.set_defaults(handler=run_list)
