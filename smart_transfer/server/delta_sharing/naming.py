"""Where datasets sit in Delta Sharing's share / schema / table tree, and the one rule that matches a
requested name to them.

Every dataset is a table of one share (``SHARE``) and one schema (``SCHEMA``). Clients name a table as
``profile#share.schema.table`` and split that on ``.``, so a table name cannot hold one: a dataset's
``.`` becomes ``__`` in its table name. Dataset names join letters and digits by *single* ``-``, ``.``
or ``_``, so no dataset name holds ``__`` and the mapping is one-to-one (``sales.eu_2024`` is the table
``sales__eu_2024``; the table name ``sales.eu_2024`` is accepted too, by REST clients that can send it).

The protocol matches share, schema and table names without regard to case (``same_name``); dataset names
are case-sensitive, so a table name resolves to the dataset spelled so, else to the one dataset of those
given whose name is the same but for case (``dataset_of_table``). Answers name the dataset's own
spelling."""

from __future__ import annotations

from collections.abc import Iterable

from smart_transfer.server.delta_sharing.errors import not_found

#: The one share, and its one schema.
SHARE = "smart-transfer"
SCHEMA = "datasets"
#: What a dataset name's ``.`` becomes in its table name.
DOT = "__"


def table_name(dataset: str) -> str:
    """The table name of a dataset."""
    return dataset.replace(".", DOT)


def dataset_name(table: str) -> str:
    """The dataset name of a table name, as spelled (not validated here: the repository does)."""
    return table.replace(DOT, ".")


def same_name(asked: str, name: str) -> bool:
    """Whether a requested share, schema or table name names ``name``: equal but for ASCII case (names
    here are ASCII, and a non-ASCII letter that lower-cases to an ASCII one, such as the Kelvin sign,
    names nothing)."""
    return asked.isascii() and asked.lower() == name.lower()


def is_share(name: str) -> bool:
    """Whether ``name`` names the one share."""
    return same_name(name, SHARE)


def is_schema(name: str) -> bool:
    """Whether ``name`` names the one schema."""
    return same_name(name, SCHEMA)


def dataset_of_table(table: str, datasets: Iterable[str]) -> str | None:
    """The dataset of ``datasets`` a table name names: the one spelled so, else the one whose name is the
    same but for case; None when none is. Two that differ only by case, neither spelled so: 404, naming
    both (the caller may read both: ``datasets`` are those it may read)."""
    spelled = dataset_name(table)
    matches = [name for name in datasets if same_name(spelled, name)]
    if spelled in matches or len(matches) <= 1:
        return spelled if spelled in matches else next(iter(matches), None)
    tables = ", ".join(table_name(name) for name in sorted(matches)[:5])
    raise not_found(f"table {table[:100]!r} names several tables that differ only by case ({tables}): spell one")
