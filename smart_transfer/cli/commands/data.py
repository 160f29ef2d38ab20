"""``tail`` and ``export``: reading a workspace dataset's records back. Both open the workspace
read-only, so they run while a pull or an ingest is under way, and see the last committed state."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from smart_transfer.cli.commands.common import (
    Commands,
    add_dataset_argument,
    add_parser,
    add_workspace_option,
    existing_workspace,
    print_json,
)
from smart_transfer.cli.commands.fetching import add_fetch_options, fetcher
from smart_transfer.cli.declared import add_bounded

if TYPE_CHECKING:
    from smart_transfer.model.versions import Range

#: Records ``tail`` shows unless ``-n`` says otherwise.
DEFAULT_TAIL_RECORDS = 20
#: Most records `tail` prints (its rows are held in memory).
MAX_TAIL_RECORDS = 1_000_000
#: Characters of one value ``tail`` shows in its table (longer ones end with an ellipsis; --json shows all).
TAIL_CELL_WIDTH = 40


def parse_range(text: str) -> Range:
    """``FIRST-LAST`` (inclusive; either end may be left out) or a single number (the one rule:
    ``model/versions.py``), as an argparse type: a bad one is a usage error."""
    from smart_transfer.config.values import BadValue
    from smart_transfer.model.versions import number_range

    try:
        return number_range(text)
    except BadValue as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _cell(value: Any, whole: bool = False) -> str:
    text = "null" if value is None else str(value)
    text = text.replace("\n", "\\n").replace("\t", "\\t")
    return text if whole or len(text) <= TAIL_CELL_WIDTH else text[: TAIL_CELL_WIDTH - 1] + "…"


def print_table(
    columns: list[str], rows: list[dict[str, Any]], whole: tuple[str, ...] = (), after: list[int] | None = None
) -> list[int]:
    """Rows as a text table, columns aligned; values cut at TAIL_CELL_WIDTH except in ``whole`` columns.
    ``after``: the column widths of the table these rows continue (no header again; no column narrower).
    Returns the widths used."""
    cells = [[_cell(row[name], name in whole) for name in columns] for row in rows]
    least = after or [0] * len(columns)
    widths = [max([len(name), least[i], *(len(line[i]) for line in cells)]) for i, name in enumerate(columns)]
    for line in cells if after else [columns, *cells]:
        print("  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip())
    return widths


def run_tail(args: argparse.Namespace) -> int:
    from smart_transfer.reading.dataset import LocalDataset
    from smart_transfer.reading.export import json_rows

    fetch = fetcher(args)
    with existing_workspace(args, read_only=True) as workspace:
        table = LocalDataset(workspace, args.dataset, fetch=fetch).tail(args.records)
    if args.json:
        sys.stdout.buffer.writelines(json_rows(table))
    elif table.num_columns:
        print_table(table.column_names, table.to_pylist())
    return 0


def run_export(args: argparse.Namespace) -> int:
    from smart_transfer.reading.dataset import LocalDataset
    from smart_transfer.reading.export import export, format_of

    fmt = format_of(args.output, args.format)
    fetch = fetcher(args)
    with existing_workspace(args, read_only=True) as workspace:
        dataset = LocalDataset(workspace, args.dataset, fetch=fetch)
        summary = export(dataset, args.output, fmt, offsets=args.offsets, blocks=args.blocks)
    if args.output == "-":
        return 0  # standard output holds the data
    if args.json:
        print_json(summary.to_dict())
    else:
        print(
            f"{summary.dataset}: exported {summary.records} record(s) from {summary.slices} slice(s) "
            f"to {summary.output} ({summary.format}); head {summary.head}"
        )
    return 0


def register(commands: Commands) -> None:
    tail = add_parser(
        commands,
        "tail",
        help="print a dataset's last records",
        description="Print the last records of a workspace dataset, oldest first, as a table (or JSON lines). "
        "Only the slices and row groups that hold them are read. Sees the last committed state, never a pull "
        "in progress. In a partial workspace the last records are read when present; absent ones fail with one line "
        "naming them and the pull that gets them, or are fetched with --fetch.",
    )
    add_dataset_argument(tail)
    add_bounded(
        tail,
        "-n",
        "--records",
        default=DEFAULT_TAIL_RECORDS,
        help="how many records",
        parse=int,
        minimum=0,
        maximum=MAX_TAIL_RECORDS,
    )
    tail.add_argument("--json", action="store_true", help="one JSON object per record")
    add_fetch_options(tail)
    add_workspace_option(tail)
    tail.set_defaults(handler=run_tail)

    export = add_parser(
        commands,
        "export",
        help="write a dataset's records to a CSV, JSON lines or Parquet file",
        description="Write the records of a workspace dataset (all, or a range of offsets or blocks) to OUT in "
        "chain order, one slice at a time; '-' writes to standard output. The file appears only when complete. "
        "Slices with differing schemas are written with their columns and types unified. In a partial workspace a "
        "range (or everything) that includes slices left out by choice fails with one line naming them and the pull "
        "that gets them, before anything is written; --fetch fetches them first.",
    )
    add_dataset_argument(export)
    export.add_argument("output", metavar="OUT", help="the file to write, or - for standard output")
    export.add_argument(
        "--format", choices=("csv", "jsonl", "parquet"), default=None, help="default: from OUT's suffix"
    )
    selection = export.add_mutually_exclusive_group()
    selection.add_argument(
        "--offsets", type=parse_range, default=None, metavar="FIRST-LAST", help="only these records (inclusive)"
    )
    selection.add_argument(
        "--blocks",
        type=parse_range,
        default=None,
        metavar="FIRST-LAST",
        help="only the slices added by these blocks (sequence numbers, inclusive)",
    )
    export.add_argument("--json", action="store_true", help="print one JSON summary object")
    add_fetch_options(export)
    add_workspace_option(export)
    export.set_defaults(handler=run_export)
