"""Where each part of a dataset lives in a store: ``{dataset}/refs/head``, ``{dataset}/blocks/{hash}``,
``{dataset}/data/{hash}``, ``{dataset}/checkpoints/{hash}``."""

from __future__ import annotations

from enum import StrEnum

from smart_transfer.model import DatasetName, Multihash


class ObjectKind(StrEnum):
    """The kinds of objects blocks reference; the value is the folder name in the layout."""

    DATA = "data"
    CHECKPOINT = "checkpoints"


def head_key(dataset: DatasetName) -> str:
    return f"{dataset}/refs/head"


def block_key(dataset: DatasetName, block_hash: Multihash) -> str:
    return f"{dataset}/blocks/{block_hash}"


def object_key(dataset: DatasetName, kind: ObjectKind, object_hash: Multihash) -> str:
    return f"{dataset}/{kind.value}/{object_hash}"


def object_prefix(dataset: DatasetName, kind: ObjectKind) -> str:
    return f"{dataset}/{kind.value}/"
