"""``diff``: two versions of a workspace dataset compared (the function the web view's comparison page
calls: repo/compare.py)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from smart_transfer.cli.commands.common import (
    Commands,
    add_dataset_argument,
    add_parser,
    add_workspace_option,
    existing_workspace,
    print_json,
)
from smart_transfer.cli.commands.data import print_table
from smart_transfer.cli.commands.fetching import add_fetch_options, fetcher
from smart_transfer.cli.exits import EXIT_ERROR, EXIT_USAGE, CliError

if TYPE_CHECKING:
    from smart_transfer.model import DataField
    from smart_transfer.reading.absent import FetchAbsent
    from smart_transfer.repo import Workspace
    from smart_transfer.repo.compare import VersionComparison


def _field(column: DataField | None) -> str:
    if column is None:
        return ""
    return f"{column.type}{'' if column.nullable else ' NOT NULL'}"


#: Where a version's schema comes from, as the text says it (repo/compare.py's schema_sources).
SCHEMA_SOURCES = {"recorded": "SetDataSchema", "footer": "slice footer", "": "none"}


def print_comparison(comparison: VersionComparison) -> None:
    """The comparison as lines a person reads: the two versions, totals, schema changes, slices."""
    base, target = comparison.base, comparison.target
    print(f"{comparison.dataset}: block {base.sequence_number} -> block {target.sequence_number}")
    print(f"  from {base.hash}  {base.system_time}")
    print(f"  to   {target.hash}  {target.system_time}")
    kinds = ", ".join(f"{kind} {count}" for kind, count in comparison.events.items())
    print(f"blocks       {comparison.blocks}" + (f" ({kinds})" if kinds else ""))
    print(f"records      +{comparison.records:,} ({base.records:,} -> {target.records:,})")
    print(f"data         +{comparison.data_bytes:,} bytes in {len(comparison.slices)} slice(s)")
    print(f"checkpoints  +{comparison.checkpoint_bytes:,} bytes in {comparison.checkpoints} checkpoint(s)")
    before, after = (SCHEMA_SOURCES[source] for source in comparison.schema_sources)
    if not comparison.schema_changes:
        print(f"schema       unchanged ({len(comparison.schema_after)} column(s), {after})")
    else:
        print(f"schema       {before} -> {after}")
        rows = [
            {"change": c.change, "column": c.name, "before": _field(c.before), "after": _field(c.after)}
            for c in comparison.schema_changes
        ]
        print_table(["change", "column", "before", "after"], rows)
    if comparison.slices:
        print("slices")
        slices: list[dict[str, Any]] = [
            {
                "block": s.sequence_number,
                "offsets": f"{s.first_offset}-{s.last_offset}",
                "records": s.records,
                "bytes": s.size,
                "slice": s.physical_hash,
            }
            for s in comparison.slices
        ]
        print_table(["block", "offsets", "records", "bytes", "slice"], slices, whole=("slice",))


def run_diff(args: argparse.Namespace) -> int:
    from smart_transfer.repo.compare import VersionError

    fetch = fetcher(args)
    with existing_workspace(args, read_only=True) as workspace:
        try:
            comparison = _compare(workspace, args, fetch)
        except VersionError as exc:
            # as export's ranges: a version that is no version (or a backwards pair) is a usage error (2),
            # a well-formed one that names no block of the chain is "not in the data" (1)
            raise CliError(str(exc), EXIT_USAGE if exc.status == 400 else EXIT_ERROR) from None
    if args.json:
        print_json(comparison.to_dict())
    else:
        print_comparison(comparison)
    return 0


def _compare(workspace: Workspace, args: argparse.Namespace, fetch: FetchAbsent | None) -> VersionComparison:
    from smart_transfer.reading.dataset import LocalDataset

    return LocalDataset(workspace, args.dataset, fetch=fetch).compare(args.base, args.target)


def register(commands: Commands) -> None:
    diff = add_parser(
        commands,
        "diff",
        help="compare two versions of a dataset",
        description="Compare two versions (blocks) of a workspace dataset: the blocks after FROM up to and "
        "including TO, the slices and records they added, the bytes, and the schema column by column. A version "
        "is a block's sequence number or full hash. The web view's comparison page shows the same.",
    )
    add_dataset_argument(diff)
    diff.add_argument("base", metavar="FROM", nargs="?", default=None, help="the older version (default: block 0)")
    diff.add_argument("target", metavar="TO", nargs="?", default=None, help="the newer version (default: the head)")
    diff.add_argument("--json", action="store_true", help="print one JSON object")
    add_fetch_options(diff)
    add_workspace_option(diff)
    diff.set_defaults(handler=run_diff)
