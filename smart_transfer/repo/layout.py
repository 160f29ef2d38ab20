"""Where each part of a dataset lives in a store: ``{dataset}/refs/head``, ``{dataset}/blocks/{hash}``,
``{dataset}/data/{hash}``, ``{dataset}/checkpoints/{hash}``."""

from __future__ import annotations

from smart_transfer.model import DatasetName, Multihash, ObjectKind

__all__ = ["ObjectKind", "block_key", "head_key", "object_key", "object_prefix"]


def head_key(dataset: DatasetName) -> str:
    return f"{dataset}/refs/head"


def block_key(dataset: DatasetName, block_hash: Multihash) -> str:
    return f"{dataset}/blocks/{block_hash}"


def object_key(dataset: DatasetName, kind: ObjectKind, object_hash: Multihash) -> str:
    return f"{dataset}/{kind.value}/{object_hash}"


def object_prefix(dataset: DatasetName, kind: ObjectKind) -> str:
    return f"{dataset}/{kind.value}/"
