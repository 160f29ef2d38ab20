"""Where datasets sit in Delta Sharing's share / schema / table tree.

Every dataset is a table of one share (``SHARE``) and one schema (``SCHEMA``). Clients name a table as
``profile#share.schema.table`` and split that on ``.``, so a table name cannot hold one: a dataset's
``.`` becomes ``__`` in its table name. Dataset names join letters and digits by *single* ``-``, ``.``
or ``_``, so no dataset name holds ``__`` and the mapping is one-to-one (``sales.eu_2024`` is the table
``sales__eu_2024``; the table name ``sales.eu_2024`` is accepted too, by REST clients that can send it)."""

from __future__ import annotations

#: The one share, and its one schema.
SHARE = "smart-transfer"
SCHEMA = "datasets"
#: What a dataset name's ``.`` becomes in its table name.
DOT = "__"


def table_name(dataset: str) -> str:
    """The table name of a dataset."""
    return dataset.replace(".", DOT)


def dataset_name(table: str) -> str:
    """The dataset name of a table name (not validated here: the repository does)."""
    return table.replace(DOT, ".")


def is_share(name: str) -> bool:
    """Share and schema names are case-insensitive (the protocol says so)."""
    return name.lower() == SHARE


def is_schema(name: str) -> bool:
    return name.lower() == SCHEMA
